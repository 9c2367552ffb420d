import { tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../core/context.js';
import * as accounts from '../domains/accounts/service.js';
import type { CreateAccountInput, CreatedAccountView, UsageView } from '../domains/accounts/schemas.js';
import * as apiKeys from '../domains/api-keys/service.js';
import * as brands from '../domains/brands/service.js';
import * as members from '../domains/members/service.js';
import { createBrand } from './brands.js';

export interface FirstBrand {
  name: string;
  slug?: string;
  livemode?: boolean;
}

/**
 * A new account with its owner and one live and one test key (secrets returned only here),
 * optionally with a first brand: all in one transaction.
 */
export async function createAccount(ctx: BaseCtx, input: CreateAccountInput, firstBrand?: FirstBrand): Promise<CreatedAccountView> {
  return withTx(ctx, async (tx) => {
    const { account, owner } = await createAccountWithOwner(tx, input);
    const live = tenantCtx(tx, account.id, true);
    const test = tenantCtx(tx, account.id, false);
    const result: CreatedAccountView = {
      account,
      owner,
      apiKeys: {
        live: await apiKeys.create(live, { name: 'Default live key' }),
        test: await apiKeys.create(test, { name: 'Default test key' }),
      },
    };
    if (firstBrand) {
      const { livemode, ...brandInput } = firstBrand;
      result.brand = await createBrand(livemode === false ? test : live, brandInput);
    }
    return result;
  });
}

/**
 * The account (the organization of its team) and its owner, in one transaction: what every way of creating an account shares (the API and CLI add keys and a brand; sign-up mails a link).
 */
export async function createAccountWithOwner(ctx: BaseCtx, input: CreateAccountInput): Promise<Pick<CreatedAccountView, 'account' | 'owner'>> {
  return withTx(ctx, async (tx) => {
    const account = await accounts.insert(tx, input.accountName ?? input.name ?? input.email);
    const owner = await members.createOwner(tenantCtx(tx, account.id, true), input.email, input.name ?? null);
    return { account, owner };
  });
}

/**
 * On an empty database, create the first account, brand and keys. An advisory lock makes
 * concurrent first starts create exactly one; later starts return null.
 */
export async function bootstrapIfEmpty(ctx: BaseCtx, input: CreateAccountInput & { brandName: string }): Promise<CreatedAccountView | null> {
  return withTx(ctx, async (tx) => {
    await tx.db.raw(`SELECT pg_advisory_xact_lock(hashtext('ticketd:bootstrap'))`);
    if (await accounts.any(tx)) return null;
    const { brandName, ...account } = input;
    return createAccount(tx, account, { name: brandName });
  });
}

/** Usage of the caller's mode. Self-hosted: no plan limits. Ticket counts are not kept yet (0). */
export async function usage(ctx: TenantCtx): Promise<UsageView> {
  return {
    ticketsThisMonth: 0,
    ticketsTotal: 0,
    brandsCount: await brands.count(ctx),
    plan: { name: 'self-hosted', ticketLimit: null, brandLimit: null },
  };
}
