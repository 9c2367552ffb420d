import { tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../core/context.js';
import { badRequest } from '../core/errors.js';
import { credentialsChanged } from '../core/credential-cache.js';
import type { Storage } from '../core/ports.js';
import * as accounts from '../domains/accounts/service.js';
import * as attachments from '../domains/attachments/service.js';
import { queueFileDeletions } from '../core/file-deletions.js';
import { accountScope } from '../core/model.js';
import type { DeleteAccountResultView } from '../domains/organizations/schemas.js';
import type { CreateAccountInput, CreatedAccountView, UsageView } from '../domains/accounts/schemas.js';
import * as apiKeys from '../domains/api-keys/service.js';
import * as billing from '../domains/billing/service.js';
import * as brands from '../domains/brands/service.js';
import * as members from '../domains/members/service.js';
import * as dashboard from '../domains/tickets/dashboard.js';
import { createBrand, deleteBrand } from './brands.js';

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

/**
 * Usage as the caller sees it (its mode, its brands): tickets from the counts kept per brand and
 * day, as the dashboard's stats read them (not spam, not deleted), all told and since the first
 * of this UTC month by the services' clock; its brands; and the account's plan.
 */
export async function usage(ctx: TenantCtx): Promise<UsageView> {
  const dayOfMonth = new Date(ctx.services.now()).getUTCDate();
  const plan = await billing.effectivePlan(ctx, await billing.current(ctx));
  return {
    ticketsThisMonth: (await dashboard.stats(ctx, { days: dayOfMonth })).total,
    ticketsTotal: (await dashboard.stats(ctx, {})).total,
    brandsCount: await brands.count(ctx),
    plan: { name: plan.name, ticketLimit: plan.ticketsPerPeriod, brandLimit: plan.brands },
  };
}

/** Files removed during the request after an account deletion; the dispatcher's purge removes the rest. */
const FILES_REMOVED_AT_ONCE = 1000;

/**
 * DELETE /v1/auth/account (owners), in one transaction: every brand of both modes through the brand
 * deletion (each with everything in it), then the account row, from which everything else cascades
 * (members and their sessions, sign-in links, profiles and avatars, API keys, feature requests, the
 * outbox, the audit log). Its keys are announced gone to every process's cache in the same
 * transaction. Files (attachments, avatars) are queued by those deletions and removed after the
 * commit. The account's audit log goes with it, so the deletion itself is written to the server log.
 */
export async function deleteAccount(ctx: TenantCtx, confirmation: string | undefined, storage: Storage): Promise<DeleteAccountResultView> {
  if (confirmation !== 'DELETE') {
    throw badRequest(
      'To delete the account and everything in it, send { "confirmation": "DELETE" }',
      [{ field: 'confirmation', message: 'must be exactly DELETE' }],
      'invalid_confirmation',
    );
  }
  const { name, brandIds, keyIds } = await withTx(ctx, async (tx) => {
    await accounts.lock(tx);
    const { name } = await accounts.get(tx);
    const brandIds: string[] = [];
    for (const livemode of [true, false]) {
      const mode = tenantCtx(tx, tx.accountId, livemode);
      for (const brand of await brands.list(mode)) {
        await deleteBrand(mode, brand.id, true);
        brandIds.push(brand.id);
      }
    }
    const keyIds = await apiKeys.forgetAccount(tx);
    await credentialsChanged(tx, 'sessions', [tx.accountId]);
    // The members' avatars go with the account (a cascade): their files first.
    await queueFileDeletions(tx, 'avatars', { sql: '?', bindings: [accountScope(tx, 'f')] });
    await accounts.deleteRow(tx);
    return { name, brandIds, keyIds };
  });
  ctx.log?.warn({ accountId: ctx.accountId, deletedBy: ctx.actor.id, brands: brandIds.length, apiKeys: keyIds.length }, 'account deleted');
  await attachments.removeQueuedFiles(ctx, storage, ctx.accountId, undefined, FILES_REMOVED_AT_ONCE).catch(() => undefined);
  const brandsText = brandIds.length === 1 ? '1 brand' : `${brandIds.length} brands`;
  return { success: true, message: `The account "${name}" and everything in it (${brandsText}) were deleted.`, deletedBrands: brandIds, deletedBrandsCount: brandIds.length };
}
