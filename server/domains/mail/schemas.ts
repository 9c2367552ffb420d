import { Type, type Static } from 'typebox';
import { INBOUND_ACTIONS } from './model.js';

export const InboundResultOut = Type.Object({
  action: Type.Union(
    INBOUND_ACTIONS.map((a) => Type.Literal(a)),
    {
      description:
        "ticket_created: a new ticket; comment_created: a reply on an existing ticket; spam: a blocked sender, or a message failing DMARC for a domain publishing p=reject or p=quarantine (a new ticket is created as spam, a reply adds nothing); ignored: our own message or inbound mail disabled for the brand; held: a new ticket beyond the plan's ticket allowance, kept and made into a ticket when the billing period rolls over or the plan grows",
    },
  ),
  brandId: Type.String(),
  ticketId: Type.Optional(Type.String()),
  commentId: Type.Optional(Type.String()),
  reason: Type.Optional(Type.String({ description: 'own_message, inbound_email_disabled, blocked_sender, dmarc_reject, dmarc_quarantine, plan_limit_reached' })),
  duplicate: Type.Optional(
    Type.Boolean({ description: "This Message-ID was delivered to the brand before; nothing new was created and the first delivery's outcome is returned" }),
  ),
});

export type InboundResultView = Static<typeof InboundResultOut>;
