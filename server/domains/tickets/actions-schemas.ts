import { Type, type Static } from 'typebox';
import { ByCredential } from '../../core/client-shapes.js';
import { Nullable } from '../../core/schemas.js';
import { CloseReason, TicketOut } from './schemas.js';

export const SpamBody = Type.Object(
  {
    isSpam: Type.Optional(Type.Boolean({ description: "true marks the ticket as spam, false restores it (the SDK's and dashboard's spelling)" })),
    action: Type.Optional(
      Type.Union([Type.Literal('mark'), Type.Literal('unmark')], { description: "The same as isSpam true/false (the interface spec's MarkAsSpam); send exactly one of the two" }),
    ),
  },
  { additionalProperties: false },
);

export const BULK_ACTIONS = ['spam', 'resolve', 'close', 'delete', 'assign', 'setCategory', 'setTags'] as const;
export const MAX_BULK_TICKETS = 100;

export const BulkBody = Type.Object(
  {
    action: Type.Union(BULK_ACTIONS.map((a) => Type.Literal(a))),
    ticketIds: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
      minItems: 1,
      maxItems: MAX_BULK_TICKETS,
      uniqueItems: true,
      description: `1-${MAX_BULK_TICKETS} distinct ticket ids`,
    }),
    assigneeId: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 64, description: 'assign: a member id; null unassigns' }))),
    categoryId: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 64, description: 'setCategory: a category id; null clears' }))),
    tags: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 50, description: 'setTags: full replacement, tag ids (tag_…) or names; unknown names create tags' }),
    ),
    closeReason: Type.Optional(Nullable(CloseReason)),
  },
  { additionalProperties: false },
);

const bulkCounts = {
  count: Type.Integer({ description: 'Tickets the action was applied to (including those it left unchanged)' }),
  failed: Type.Integer({ description: 'Ticket ids that are missing, deleted, or of another brand, account or mode' }),
  failedIds: Type.Array(Type.String()),
};

/** What a bulk action did: the dashboard toasts two numbers, the SDK tests a boolean. */
export const BulkResult = ByCredential(
  Type.Object(
    { success: Type.Integer({ description: 'The same number as count: the tickets acted on' }), ...bulkCounts },
    { description: '{ success, failed } as numbers, as the dashboard shows them' },
  ),
  Type.Object({ success: Type.Boolean({ description: 'true when every ticket named was acted on (failed is 0)' }), ...bulkCounts }, { description: '{ success: boolean, count }' }),
  'What the action did, with the ids it could not act on',
);

export const MAX_MERGE_SOURCES = 50;
const MergeSources = (description: string) =>
  Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { minItems: 1, maxItems: MAX_MERGE_SOURCES, uniqueItems: true, description });

export const MergeBody = Type.Object(
  {
    sourceTicketIds: Type.Optional(MergeSources(`1-${MAX_MERGE_SOURCES} tickets to fold into the target (the SDK's and dashboard's spelling)`)),
    ticketIds: Type.Optional(MergeSources('The same list under another name; send exactly one of the two')),
  },
  { additionalProperties: false },
);

/** The target ticket (what the SDK reads) plus the summary the dashboard reads. */
export const MergeResult = Type.Object({
  ...TicketOut.properties,
  targetTicketId: Type.String(),
  mergedTicketIds: Type.Array(Type.String()),
  mergedCount: Type.Integer(),
});

export type MergeInput = Static<typeof MergeBody>;
export type MergeResultView = Static<typeof MergeResult>;
export type SpamInput = Static<typeof SpamBody>;
export type BulkInput = Static<typeof BulkBody>;
/** What bulk did, before it is told in the caller's shape. */
export interface BulkOutcome {
  count: number;
  failedIds: string[];
}
