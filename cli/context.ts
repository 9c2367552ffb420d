import { systemCtx, tenantCtx, type BaseCtx, type TenantCtx } from '../server/core/context.js';
import type { Services } from '../server/core/services.js';
import { notFound } from '../server/core/errors.js';
import { UsageError } from './io.js';

// Loaded by the functions that use them, so a command that needs neither starts without them.
const accountsService = () => import('../server/domains/accounts/service.js');

export type Mode = 'live' | 'test';

/** Administrators act as the system; audit entries name the CLI. */
export function adminCtx(services: Services): BaseCtx {
  return systemCtx(services, 'cli');
}

/** The account named by --account, or the only one there is. */
export async function resolveAccount(services: Services, accountId: string | undefined): Promise<string> {
  if (accountId) return accountId;
  const all = await (await accountsService()).listAll(adminCtx(services));
  if (all.length === 1) return all[0]!.id;
  if (all.length === 0) throw new UsageError('there are no accounts yet: run `ticketd init` or `ticketd accounts create`');
  throw new UsageError(`there are ${all.length} accounts: pass --account (see \`ticketd accounts list\`)`);
}

/** A tenant scope for the CLI; fails (not found) when the account does not exist. */
export async function accountCtx(services: Services, accountId: string | undefined, mode: Mode): Promise<TenantCtx> {
  const ctx = tenantCtx(adminCtx(services), await resolveAccount(services, accountId), mode === 'live');
  await (await accountsService()).get(ctx);
  return ctx;
}

/** The tenant scope of a brand named by its id (either mode): what the brand's commands act in. */
export async function brandCtx(services: Services, brandId: string): Promise<TenantCtx> {
  const { locate } = await import('../server/core/brand.js');
  const brand = await locate(adminCtx(services), brandId);
  if (!brand) throw notFound('Brand');
  return tenantCtx(adminCtx(services), brand.accountId, brand.livemode);
}
