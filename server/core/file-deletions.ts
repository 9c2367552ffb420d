import type { BaseCtx } from './context.js';
import type { SqlFragment } from './db.js';

/**
 * The stored files of attachment and avatar rows: a row's deletion queues its file in
 * attachment_file_deletions in the same transaction (the dispatcher's attachment purge removes the
 * file and the entry after the commit), so a committed delete never leaves bytes behind and a
 * rolled-back one never loses them. The deleting statements say so themselves (no trigger: on a
 * distributed database a trigger may not write another table): a DELETE through deleteQueuingFiles,
 * a cascade (a brand, a member, an account deleted) through queueFileDeletions just before it.
 */
export type FileTable = 'attachments' | 'avatars';

/** Queues the files of the rows of `table` (alias `f`) matching `where`, which a cascade is about to delete. */
export async function queueFileDeletions(ctx: BaseCtx, table: FileTable, where: SqlFragment): Promise<void> {
  await ctx.db.raw(
    `insert into attachment_file_deletions (account_id, attachment_id)
     select f.account_id, f.id from ${table} f where ${where.sql} on conflict do nothing`,
    where.bindings as never[],
  );
}

/**
 * Deletes the rows of `table` (alias `f`) matching `where` and queues their files, in one
 * statement; returns the deleted rows' `returning` columns.
 */
export async function deleteQueuingFiles<R = { account_id: string; id: string }>(
  ctx: BaseCtx,
  table: FileTable,
  where: SqlFragment,
  returning = 'f.account_id, f.id',
): Promise<R[]> {
  const result = (await ctx.db.raw(
    `with gone as (delete from ${table} f where ${where.sql} returning f.account_id as "fileAccountId", f.id as "fileId", ${returning}),
     queued as (insert into attachment_file_deletions (account_id, attachment_id) select "fileAccountId", "fileId" from gone on conflict do nothing)
     select * from gone`,
    where.bindings as never[],
  )) as { rows: (R & { fileAccountId?: string; fileId?: string })[] };
  return result.rows.map(({ fileAccountId: _a, fileId: _i, ...row }) => row as R);
}
