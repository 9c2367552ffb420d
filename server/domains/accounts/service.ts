import type { BaseCtx, TenantCtx } from '../../core/context.js';
import { notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { Account } from './model.js';
import type { AccountView, CreatedAccountView } from './schemas.js';

/** A new account row (its owner, keys and first brand come with it: flows/accounts.ts). */
export async function insert(ctx: BaseCtx, name: string): Promise<CreatedAccountView['account']> {
  const row = await Account.query(ctx.db)
    .insert({ id: newId(ID_PREFIX.account), name })
    .returning('*');
  return { id: row.id, object: 'account', name: row.name, createdAt: row.createdAt.toISOString(), updatedAt: row.updatedAt.toISOString() };
}

/** Whether any account exists (the first start bootstraps one when none does). */
export async function any(ctx: BaseCtx): Promise<boolean> {
  return (await Account.query(ctx.db).first()) !== undefined;
}

export async function get(ctx: TenantCtx): Promise<AccountView> {
  const row = await Account.query(ctx.db).findById(ctx.accountId);
  if (!row) throw notFound('Account');
  return { id: row.id, object: 'account', name: row.name, livemode: ctx.livemode, createdAt: row.createdAt.toISOString(), updatedAt: row.updatedAt.toISOString() };
}

/** For administrators: every account, oldest first. */
export async function listAll(ctx: BaseCtx): Promise<{ id: string; name: string; createdAt: string }[]> {
  const rows = await Account.query(ctx.db).orderBy('id', 'asc');
  return rows.map((r) => ({ id: r.id, name: r.name, createdAt: r.createdAt.toISOString() }));
}

/** The names of these accounts (organizations), by id; unknown ids are left out. */
export async function namesOf(ctx: BaseCtx, accountIds: readonly string[]): Promise<Map<string, string>> {
  if (!accountIds.length) return new Map();
  const rows = await Account.query(ctx.db)
    .whereIn('id', [...accountIds])
    .select('id', 'name');
  return new Map(rows.map((r) => [r.id, r.name]));
}

/** Renames the account (its organization's name); returns the name it had. */
export async function rename(ctx: TenantCtx, name: string): Promise<{ from: string; to: string }> {
  const row = await Account.query(ctx.db).findById(ctx.accountId).forUpdate();
  if (!row) throw notFound('Account');
  await Account.query(ctx.db)
    .findById(ctx.accountId)
    .patch({ name, updatedAt: new Date(ctx.services.now()) });
  return { from: row.name, to: name };
}

/** Locks the account row for a change of the whole account (two deletions of one account serialize); 404 when it is gone. */
export async function lock(ctx: TenantCtx): Promise<void> {
  if (!(await Account.query(ctx.db).findById(ctx.accountId).forUpdate())) throw notFound('Account');
}

/** Deletes the account row: every tenant table cascades from it (the audit log included). */
export async function deleteRow(ctx: TenantCtx): Promise<void> {
  await Account.query(ctx.db).deleteById(ctx.accountId);
}
