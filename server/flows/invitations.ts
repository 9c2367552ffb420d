import { withTx, type TenantCtx } from '../core/context.js';
import * as outbox from '../core/outbox/service.js';
import * as accounts from '../domains/accounts/service.js';
import * as billing from '../domains/billing/service.js';
import { invitation } from '../domains/mail/messages.js';
import { settingsOf } from '../domains/mail/service.js';
import * as team from '../domains/members/team.js';
import type { InviteInput } from '../domains/members/team-schemas.js';
import * as sessions from '../domains/sessions/service.js';

/**
 * Invitations by mail: the pending member (members domain), its link (a sign-in link of the
 * pending member that works until the invitation expires, sessions domain) and the mail through the
 * outbox, in one transaction. Following the link signs the invitee in and accepts the invitation
 * (flows/sign-in.ts verify); the dashboard then posts `org_invite` to accept-invite, which answers
 * an accepted invitation as accepted (docs/decisions/0047-member-invitations.md).
 */

const INVITATION_MAIL_EVENT = 'mail.invitation';

/** `<origin>/auth/callback?token=…&org_invite=…`: the dashboard's callback verifies the token, then accepts the invite id. */
export function invitationUrl(origin: string, token: string, inviteId: string): string {
  return `${origin}/auth/callback?token=${encodeURIComponent(token)}&org_invite=${encodeURIComponent(inviteId)}`;
}

/**
 * Where the link points: the route's choice among the dashboard origins. Asked for once the
 * invitation is found, so a member id of another account reads as 404 whatever the request's origin.
 */
export type LinkOrigin = () => string;

/** A fresh link for the invitation (every earlier one stops working) and its mail, in the caller's transaction. */
async function mailInvitation(tx: TenantCtx, sent: team.Invitation, linkOrigin: LinkOrigin): Promise<void> {
  const origin = linkOrigin();
  const link = await sessions.issueInviteLink(tx, sent.memberId, origin, sent.expiresAt);
  const organizationName = (await accounts.namesOf(tx, [tx.accountId])).get(tx.accountId) ?? tx.accountId;
  const message = invitation(settingsOf(tx.services), {
    linkId: link.id,
    to: { address: sent.email },
    url: invitationUrl(origin, link.token, sent.memberId),
    organizationName,
    invitedBy: tx.actor.name ?? 'A team member',
    role: sent.role,
    expiresAt: sent.expiresAt,
  });
  // Like a sign-in mail, the message carries the token until it is sent; the link works once.
  await outbox.enqueue(tx, { kind: 'mail', brandId: null, event: INVITATION_MAIL_EVENT, payload: { message } });
}

/** POST /v1/auth/members/invite: a new invitation, or a renewed one for an address already invited. */
export async function inviteMember(ctx: TenantCtx, input: InviteInput, origin: LinkOrigin): Promise<{ success: true; message: string; memberId: string }> {
  return withTx(ctx, async (tx) => {
    const sent = await team.invite(tx, input);
    if (!sent.renewed) await billing.assertWithinPlan(tx, 'members');
    await mailInvitation(tx, sent, origin);
    const message = sent.renewed
      ? `${sent.email} was already invited: the invitation was sent again with this role and these brands, and earlier links no longer work`
      : `An invitation was sent to ${sent.email}`;
    return { success: true as const, message, memberId: sent.memberId };
  });
}

/** POST /v1/auth/members/{memberId}/resend-invite: a fresh link and expiry; earlier links stop working. */
export async function resendInvite(ctx: TenantCtx, memberId: string, origin: LinkOrigin): Promise<{ success: true; message: string }> {
  return withTx(ctx, async (tx) => {
    const sent = await team.renewInvite(tx, memberId);
    await mailInvitation(tx, sent, origin);
    return { success: true as const, message: `The invitation was sent again to ${sent.email}; earlier links no longer work` };
  });
}
