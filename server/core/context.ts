import type { Db } from './db.js';
import type { Services } from './services.js';

export type PerformerType = 'api' | 'user' | 'customer' | 'system';

export interface Actor {
  type: PerformerType;
  id: string | null;
  name: string | null;
  /** Where the actor's changes come from, when the type does not say it (e.g. `email` for inbound mail). */
  source?: string;
}

/** Where a service reports what the caller is not told (the request's logger over HTTP). */
export interface Log {
  warn(details: object, message: string): void;
}

/** What every service call carries: the process's services, the connection (pool or open transaction) and who acts. */
export interface BaseCtx {
  services: Services;
  db: Db;
  actor: Actor;
  requestId: string | null;
  log?: Log;
  /** Brands already found in this transaction (core/brand.ts requireBrand); set by withTx. */
  txBrands?: Map<string, object>;
  /** What runs once this transaction commits (afterCommit); set by withTx. */
  txCommitted?: (() => void)[];
  /** NOTIFYs withTx sends as the transaction's last statement (core/notify.ts notifyAtCommit): channel → payloads. */
  txNotify?: Map<string, Set<string>>;
}

/** The brand scope of the credential in use. */
export interface BrandScope {
  allBrands: boolean;
  brandIds: readonly string[];
}

/**
 * A tenant scope: one account in one mode. Test mode is a second, fully separate data scope of
 * the same account, so "another account" and "the other mode" are one and the same check.
 */
export interface TenantCtx extends BaseCtx {
  accountId: string;
  livemode: boolean;
  brandScope: BrandScope;
  /** Set when the caller is a member's session (not an API key). */
  session?: SessionCaller;
  /** Set when the caller is a customer with a portal token: one contact of one brand. */
  portal?: PortalCaller;
}

/** A customer in an embedding application: their token, and the brand and contact it is bound to. */
export interface PortalCaller {
  tokenId: string;
  brandId: string;
  contactId: string;
  email: string;
  name: string | null;
  expiresAt: Date;
}

/** Roles of an organization's members, most powerful first. */
export const MEMBER_ROLES = ['owner', 'admin', 'member'] as const;
export type MemberRole = (typeof MEMBER_ROLES)[number];

/** Whether `role` is `least` or above it (owner > admin > member). */
export function hasRole(role: MemberRole, least: MemberRole): boolean {
  return MEMBER_ROLES.indexOf(role) <= MEMBER_ROLES.indexOf(least);
}

/** A member signed in to the dashboard: their session, who they are and their role. */
export interface SessionCaller {
  sessionId: string;
  memberId: string;
  role: MemberRole;
  /** When the session ends unless used again (its sliding expiry, never past its cap). */
  expiresAt: Date;
  /** Opened by single sign-on: its identity provider vouched for the address to this organization only. */
  sso?: boolean;
}

export const ALL_BRANDS: BrandScope = Object.freeze({ allBrands: true, brandIds: [] });

export function systemActor(name = 'ticketd'): Actor {
  return { type: 'system', id: null, name };
}

export function systemCtx(services: Services, name?: string): BaseCtx {
  return { services, db: services.db, actor: systemActor(name), requestId: null };
}

export function tenantCtx(base: BaseCtx, accountId: string, livemode: boolean, brandScope = ALL_BRANDS): TenantCtx {
  return { ...base, accountId, livemode, brandScope };
}

/** Runs fn in a transaction, joining the one ctx already holds. Only services call this. */
export async function withTx<C extends BaseCtx, T>(ctx: C, fn: (ctx: C) => Promise<T>): Promise<T> {
  if (ctx.db.isTransaction) return fn(ctx);
  const committed: (() => void)[] = [];
  const result = await ctx.db.transaction(async (trx) => {
    const notes = new Map<string, Set<string>>();
    const value = await fn({ ...ctx, db: trx, txBrands: new Map(), txCommitted: committed, txNotify: notes });
    // On this transaction's own connection: delivered at its commit, dropped if it rolls back (as a
    // trigger's NOTIFY), and sent by the node the application talks to (on Citus, the coordinator).
    if (notes.size) {
      const pairs = [...notes].flatMap(([channel, payloads]) => [...payloads].map((p) => [channel, p] as const));
      await trx.raw('SELECT pg_notify(c, p) FROM unnest(?::text[], ?::text[]) AS n(c, p)', [pairs.map((x) => x[0]), pairs.map((x) => x[1])]);
    }
    return value;
  });
  for (const done of committed) done();
  return result;
}

/** Thrown to end a dry run's transaction: knex rolls back a transaction whose function throws. */
class DryRunOver extends Error {}

/**
 * Runs fn in a transaction that is always rolled back: a dry run sees its own writes, and nothing
 * of it stays (its audit rows, events, mail and afterCommit work go too). Not inside another one.
 */
export async function dryRun<C extends BaseCtx, T>(ctx: C, fn: (ctx: C) => Promise<T>): Promise<T> {
  if (ctx.db.isTransaction) throw new Error('dryRun: a dry run needs a transaction of its own');
  let value: T | undefined;
  try {
    await ctx.db.transaction(async (trx) => {
      value = await fn({ ...ctx, db: trx, txBrands: new Map(), txCommitted: [], txNotify: new Map() });
      throw new DryRunOver();
    });
  } catch (err) {
    if (!(err instanceof DryRunOver)) throw err;
  }
  return value as T;
}

/** Runs `done` once the transaction of withTx that ctx is in commits (never if it rolls back); outside one, now. */
export function afterCommit(ctx: BaseCtx, done: () => void): void {
  if (ctx.txCommitted) ctx.txCommitted.push(done);
  else done();
}

export function canSeeBrand(scope: BrandScope, brandId: string): boolean {
  return scope.allBrands || scope.brandIds.includes(brandId);
}

/** The customer of a portal route (its auth guarantees one). */
export function portalCaller(ctx: TenantCtx): PortalCaller {
  if (!ctx.portal) throw new Error('portalCaller: this route must declare auth: portal');
  return ctx.portal;
}

/** The signed-in member of a route that takes a session only (its auth guarantees one). */
export function sessionMemberId(ctx: TenantCtx): string {
  if (!ctx.session) throw new Error('sessionMemberId: this route must declare auth: session');
  return ctx.session.memberId;
}
