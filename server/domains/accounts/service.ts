import { tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../../core/context.js';
import { notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import * as apiKeys from '../api-keys/service.js';
import * as brands from '../brands/service.js';
import * as members from '../members/service.js';
import { Account } from './model.js';
import type { AccountView, CreateAccountInput, CreatedAccountView, UsageView } from './schemas.js';

export interface FirstBrand {
  name: string;
  slug?: string;
  livemode?: boolean;
}

/**
 * A new account with its owner and one live and one test key (secrets returned only here),
 * optionally with a first brand: all in one transaction.
 */
export async function create(ctx: BaseCtx, input: CreateAccountInput, firstBrand?: FirstBrand): Promise<CreatedAccountView> {
  return withTx(ctx, async (tx) => {
    const account = await Account.query(tx.db).insertAndFetch({
      id: newId(ID_PREFIX.account),
      name: input.accountName ?? input.name ?? input.email,
    });
    const live = tenantCtx(tx, account.id, true);
    const test = tenantCtx(tx, account.id, false);
    const owner = await members.createOwner(live, input.email, input.name ?? null);
    const result: CreatedAccountView = {
      account: { id: account.id, object: 'account', name: account.name, createdAt: account.createdAt.toISOString(), updatedAt: account.updatedAt.toISOString() },
      owner,
      apiKeys: {
        live: await apiKeys.create(live, { name: 'Default live key' }),
        test: await apiKeys.create(test, { name: 'Default test key' }),
      },
    };
    if (firstBrand) {
      const { livemode = true, ...brandInput } = firstBrand;
      result.brand = await brands.create(livemode ? live : test, brandInput);
    }
    return result;
  });
}

/**
 * On an empty database, create the first account, brand and keys. An advisory lock makes
 * concurrent first starts create exactly one; later starts return null.
 */
export async function bootstrapIfEmpty(ctx: BaseCtx, input: CreateAccountInput & { brandName: string }): Promise<CreatedAccountView | null> {
  return withTx(ctx, async (tx) => {
    await tx.db.raw(`SELECT pg_advisory_xact_lock(hashtext('ticketd:bootstrap'))`);
    if (await Account.query(tx.db).first()) return null;
    const { brandName, ...account } = input;
    return create(tx, account, { name: brandName });
  });
}

export async function get(ctx: TenantCtx): Promise<AccountView> {
  const row = await Account.query(ctx.db).findById(ctx.accountId);
  if (!row) throw notFound('Account');
  return { id: row.id, object: 'account', name: row.name, livemode: ctx.livemode, createdAt: row.createdAt.toISOString(), updatedAt: row.updatedAt.toISOString() };
}

/** Usage of the caller's mode. Self-hosted: no plan limits. Ticket counts join with the tickets issue. */
export async function usage(ctx: TenantCtx): Promise<UsageView> {
  return {
    ticketsThisMonth: 0,
    ticketsTotal: 0,
    brandsCount: await brands.count(ctx),
    plan: { name: 'self-hosted', ticketLimit: null, brandLimit: null },
  };
}

/** For administrators: every account, oldest first. */
export async function listAll(ctx: BaseCtx): Promise<{ id: string; name: string; createdAt: string }[]> {
  const rows = await Account.query(ctx.db).orderBy('id', 'asc');
  return rows.map((r) => ({ id: r.id, name: r.name, createdAt: r.createdAt.toISOString() }));
}
