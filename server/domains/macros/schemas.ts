import { Type, type Static } from 'typebox';
import { Nullable, Timestamp } from '../../core/schemas.js';
import { VisibilitySchema as Visibility } from '../../core/saved-items.js';
import { CommentOut } from '../comments/schemas.js';
import { Action } from '../rules/schemas.js';
import { TicketOut } from '../tickets/schemas.js';

/**
 * Macros: a named set of actions (those of triggers, docs/api.md "Macros") and a comment whose
 * body is a Liquid template, applied by hand to tickets. Shared in the brand or personal.
 */

const Id = Type.String({ minLength: 1, maxLength: 64 });
const BrandId = Type.String({ minLength: 1, maxLength: 64, description: 'Brand id (`br_…`; `ws_…` is accepted too)' });
const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' });

export type MacroAction = Static<typeof Action>;
export const MAX_MACRO_ACTIONS = 50;
const MacroComment = Type.Object(
  {
    body: Type.String({
      minLength: 1,
      maxLength: 20_000,
      pattern: '\\S',
      description: 'A Liquid template: {{ticket.title}}, {{customer.name}}, {{brand.name}}, {{assignee.name}}, …',
    }),
    isInternal: Type.Optional(Type.Boolean({ description: 'An internal note; default false: a public reply, mailed to the customer' })),
  },
  { additionalProperties: false },
);
export type MacroComment = Static<typeof MacroComment>;

const macroFields = {
  name: Name,
  visibility: Visibility,
  actions: Type.Array(Action, { maxItems: MAX_MACRO_ACTIONS, description: 'Applied in order, as a trigger’s' }),
  comment: Type.Optional(Nullable(MacroComment)),
};
export const CreateMacroBody = Type.Object(macroFields, { additionalProperties: false });
export type CreateMacroInput = Static<typeof CreateMacroBody>;
export const UpdateMacroBody = Type.Partial(Type.Object(macroFields), { additionalProperties: false, minProperties: 1 });
export type UpdateMacroInput = Static<typeof UpdateMacroBody>;

export const MacroOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('macro'),
  brandId: Type.String(),
  name: Type.String(),
  visibility: Type.String(),
  ownerId: Nullable(Type.String({ description: 'The member a personal macro belongs to; null for the brand’s' })),
  actions: Type.Array(Type.Unknown()),
  comment: Nullable(Type.Object({ body: Type.String(), isInternal: Type.Boolean() })),
  createdBy: Nullable(Type.String()),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
export type MacroView = Static<typeof MacroOut>;
export const MacroListOut = Type.Object({ data: Type.Array(MacroOut) });

export const MacroParams = Type.Object({ brandId: BrandId, macroId: Id });

export const MAX_APPLY_TICKETS = 100;
export const ApplyMacroBody = Type.Object(
  {
    ticketId: Type.Optional(Id),
    ticketIds: Type.Optional(Type.Array(Id, { minItems: 1, maxItems: MAX_APPLY_TICKETS, uniqueItems: true })),
  },
  { additionalProperties: false, minProperties: 1, maxProperties: 1, description: 'Either ticketId or ticketIds' },
);
export type ApplyMacroInput = Static<typeof ApplyMacroBody>;

const ErrorOut = Type.Object({
  statusCode: Type.Integer(),
  code: Type.String(),
  message: Type.String(),
  errors: Type.Optional(Type.Array(Type.Object({ field: Type.String(), message: Type.String() }))),
});
export const ApplyMacroOut = Type.Object({
  data: Type.Array(
    Type.Object({
      ticketId: Type.String(),
      ok: Type.Boolean(),
      ticket: Type.Optional(TicketOut),
      comment: Type.Optional(Nullable(CommentOut)),
      error: Type.Optional(ErrorOut),
    }),
    { description: 'One result per ticket, in the order given; a ticket that failed (error) is left as it was' },
  ),
});

export const PreviewMacroBody = Type.Object({ ticketId: Id }, { additionalProperties: false });
export type PreviewMacroInput = Static<typeof PreviewMacroBody>;
export const PreviewMacroOut = Type.Object({
  ticket: TicketOut,
  comment: Nullable(Type.Object({ body: Type.String({ description: 'The comment rendered for this ticket' }), isInternal: Type.Boolean() })),
});
