/** A message's states, apart from the model: the CLI names them in its options without loading objection. */
export const OUTBOX_STATUSES = ['pending', 'retrying', 'success', 'failed', 'dead'] as const;
export type OutboxStatus = (typeof OUTBOX_STATUSES)[number];
