import type { BaseCtx, TenantCtx } from '../../core/context.js';
import { tenantCtx, withTx } from '../../core/context.js';
import * as audit from '../../core/audit.js';
import { lockBrand, requireBrand } from '../../core/brand.js';
import { isPgError, PG } from '../../core/db.js';
import { badRequest, conflict, notFound } from '../../core/errors.js';
import { ID_PREFIX, newId, normalizeBrandId } from '../../core/ids.js';
import { preparedRows, scopeOf } from '../../core/model.js';
import { assertPublicHost, OutboundRefused } from '../../core/outbound.js';
import { keyringPart, type SealContext, type SealedColumn } from '../../core/sealed.js';
import { oauthClientOf, type OAuthProvider } from '../../integrations/oauth-token.js';
import type { QueryBuilder } from 'objection';
import { EmailConnection, type ConnectionStatus } from './model.js';
import type { CreateConnectionInput, EmailConnectionView, UpdateConnectionInput } from './schemas.js';

/**
 * A brand's mailboxes, taken in over IMAP (see the email_connections migration). The password is
 * sealed before the transaction and opened only by the process that connects.
 */

/** Where an IMAP host may be: the operator's webhookAllowPrivate, the same rule as webhooks. */
export interface ConnectionPolicy {
  allowPrivate: boolean;
}

export const SEALED_SECRETS: readonly SealedColumn[] = [{ table: 'email_connections', column: 'secret', purpose: 'email_connection.secret' }];
const SECRET_SEAL = (accountId: string): SealContext => ({ purpose: SEALED_SECRETS[0]!.purpose, accountId });

/** A timestamp of a row: a Date, or an ISO string in preparedRows' rows on Citus. */
function iso(d: Date | string): string;
function iso(d: Date | string | null): string | null;
function iso(d: Date | string | null): string | null {
  return d ? new Date(d).toISOString() : null;
}

export function toView(row: EmailConnection): EmailConnectionView {
  return {
    id: row.id,
    object: 'email_connection',
    brandId: row.brandId,
    name: row.name,
    isPrimary: row.isPrimary,
    provider: row.provider,
    email: row.email,
    host: row.host,
    port: row.port,
    tls: row.tls,
    username: row.username,
    passwordSet: Boolean(row.secret),
    mailbox: row.mailbox,
    moveTo: row.moveTo,
    status: row.status,
    lastSyncAt: iso(row.lastSyncAt),
    errorMessage: row.errorMessage,
    createdAt: iso(row.createdAt),
    updatedAt: iso(row.updatedAt),
  };
}

const ofBrand = (ctx: TenantCtx, brandId: string) => EmailConnection.scoped(ctx).where('brandId', normalizeBrandId(brandId));

/**
 * The brand's connections, the primary first, then oldest first. The brand was checked before the
 * request got here (core/auth.ts): this is the one read, on the brand's index, even for a brand with none.
 */
export async function list(ctx: TenantCtx, brandId: string): Promise<EmailConnectionView[]> {
  const rows = await preparedRows<EmailConnection>(ctx, ofBrand(ctx, brandId).orderBy([{ column: 'isPrimary', order: 'desc' }, { column: 'id' }]));
  return rows.map(toView);
}

async function requireConnection(ctx: TenantCtx, brandId: string, connectionId: string, lock = false): Promise<EmailConnection> {
  const query = ofBrand(ctx, brandId).findById(connectionId);
  const row = await (lock ? query.forUpdate() : query);
  if (!row) throw notFound('Email connection');
  return row;
}

export async function get(ctx: TenantCtx, brandId: string, connectionId: string): Promise<EmailConnectionView> {
  await requireBrand(ctx, brandId);
  return toView(await requireConnection(ctx, brandId, connectionId));
}

/** An IMAP host the server may connect to: a name or address, public unless the operator allows private ones. */
async function checkHost(raw: string, policy: ConnectionPolicy): Promise<string> {
  const host = raw.trim().toLowerCase().replace(/\.$/, '');
  const invalid = (why: string, code = 'invalid_imap_host') => badRequest(`host ${why}`, [{ field: 'host', message: why }], code);
  let url: URL;
  try {
    url = new URL(`imap://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}`);
  } catch {
    throw invalid('must be a host name or an IP address');
  }
  if (url.port || url.pathname || url.username) throw invalid('must be a host name or an IP address alone (give the port as port)');
  try {
    await assertPublicHost(url, policy.allowPrivate);
  } catch (err) {
    if (!(err instanceof OutboundRefused)) throw err;
    throw invalid(`refused: ${err.message}`, err.code === 'private_address' ? 'imap_host_not_public' : 'imap_host_unresolvable');
  }
  return host;
}

/** Where Google's and Microsoft's mailboxes are read. */
const OAUTH_HOSTS: Readonly<Record<OAuthProvider, string>> = { GMAIL: 'imap.gmail.com', OUTLOOK: 'outlook.office365.com' };

/**
 * The secret a connection signs in with: IMAP's password, or the refresh token of a GMAIL or
 * OUTLOOK mailbox (whose OAuth client the operator must have configured). The other one is refused.
 */
const SECRET_NAME = { password: 'password', refreshToken: 'refresh token' } as const;

function secretOfInput(ctx: TenantCtx, provider: EmailConnection['provider'], input: { password?: string; refreshToken?: string }): string | undefined {
  const [wanted, other] = provider === 'IMAP' ? (['password', 'refreshToken'] as const) : (['refreshToken', 'password'] as const);
  if (input[other] !== undefined) {
    throw badRequest(
      `A ${provider} connection signs in with a ${SECRET_NAME[wanted]}, not a ${SECRET_NAME[other]}`,
      [{ field: other, message: `is not used by ${provider}` }],
      'invalid_email_connection',
    );
  }
  if (provider !== 'IMAP' && !oauthClientOf(ctx.services.config, provider)) {
    const [company, setting] = provider === 'GMAIL' ? ['Google', 'googleClientId'] : ['Microsoft', 'microsoftClientId'];
    throw badRequest(
      `This server has no OAuth client for ${company} (${setting} in its configuration): connect the mailbox as IMAP with an app password`,
      [{ field: 'provider', message: 'has no OAuth client configured' }],
      'oauth_client_not_configured',
    );
  }
  return input[wanted];
}

/** A new connection, ACTIVE: the dispatcher takes it in from its next round. The first of the brand is primary. */
export async function create(ctx: TenantCtx, policy: ConnectionPolicy, brandId: string, input: CreateConnectionInput): Promise<EmailConnectionView> {
  const provider = input.provider;
  const given = secretOfInput(ctx, provider, input);
  if (given === undefined) {
    const field = provider === 'IMAP' ? 'password' : 'refreshToken';
    throw badRequest(`${field} is required for a ${provider} connection`, [{ field, message: 'is required' }], 'invalid_email_connection');
  }
  if (provider === 'IMAP' && !input.host) throw badRequest('host is required for an IMAP connection', [{ field: 'host', message: 'is required' }], 'invalid_email_connection');
  const host = input.host ? await checkHost(input.host, policy) : OAUTH_HOSTS[provider as OAuthProvider];
  const email = input.email.trim().toLowerCase();
  const tls = input.tls ?? true;
  const secret = await ctx.services.get(keyringPart).seal(given, SECRET_SEAL(ctx.accountId));
  return withTx(ctx, async (tx) => {
    const brand = await lockBrand(tx, brandId);
    const hasPrimary = await ofBrand(tx, brand).where('isPrimary', true).select('id').first();
    let row: EmailConnection;
    try {
      row = (await EmailConnection.query(tx.db)
        .insert({
          id: newId(ID_PREFIX.emailConnection),
          ...scopeOf(tx),
          brandId: brand,
          name: input.name?.trim() ?? email,
          provider,
          email,
          host,
          port: input.port ?? (tls ? 993 : 143),
          tls,
          username: input.username?.trim() || email,
          secret,
          mailbox: input.mailbox ?? 'INBOX',
          moveTo: input.moveTo ?? null,
          isPrimary: !hasPrimary,
        })
        .returning('*')) as unknown as EmailConnection;
    } catch (err) {
      if (isPgError(err, PG.uniqueViolation, 'email_connections_mailbox_unique')) throw conflict(`${email} is already connected to this brand`, 'email_connection_exists');
      throw err;
    }
    await audit.record(tx, {
      brandId: brand,
      entityType: 'email_connection',
      entityId: row.id,
      event: 'email_connection.created',
      metadata: { provider, email, host, port: row.port },
    });
    return toView(row);
  });
}

/**
 * Renames it, or gives it a new password (IMAP) or refresh token (GMAIL, OUTLOOK): then it is
 * ACTIVE again, its failures forgotten (a DISCONNECTED connection waits for exactly that). The
 * secret is sealed before the transaction.
 */
export async function update(ctx: TenantCtx, brandId: string, connectionId: string, input: UpdateConnectionInput): Promise<EmailConnectionView> {
  // Sealed before the transaction; whether it is the kind of secret the connection takes is known in it.
  const given = input.password ?? input.refreshToken;
  const secret = given === undefined ? null : await ctx.services.get(keyringPart).seal(given, SECRET_SEAL(ctx.accountId));
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const current = await requireConnection(tx, brand.id, connectionId, true);
    secretOfInput(tx, current.provider, input);
    const name = input.name?.trim() ?? current.name;
    if (name === current.name && !secret) return toView(current);
    const reconnected = secret ? { secret, status: 'ACTIVE' as const, errorMessage: null, failures: 0, retryAt: null } : {};
    const row = (await ofBrand(tx, brand.id)
      .where('id', current.id)
      .patch({ name, ...reconnected, updatedAt: new Date(ctx.services.now()) })
      .returning('*')
      .first()) as unknown as EmailConnection;
    await audit.record(tx, {
      brandId: brand.id,
      entityType: 'email_connection',
      entityId: row.id,
      event: 'email_connection.updated',
      changes: name === current.name ? [] : [{ field: 'name', from: current.name, to: name }],
      ...(secret ? { metadata: { passwordChanged: true } } : {}),
    });
    return toView(row);
  });
}

export async function makePrimary(ctx: TenantCtx, brandId: string, connectionId: string): Promise<EmailConnectionView> {
  return withTx(ctx, async (tx) => {
    const brand = await lockBrand(tx, brandId);
    const current = await requireConnection(tx, brand, connectionId, true);
    if (current.isPrimary) return toView(current);
    await ofBrand(tx, brand)
      .where('isPrimary', true)
      .patch({ isPrimary: false, updatedAt: new Date(ctx.services.now()) });
    const row = (await ofBrand(tx, brand)
      .where('id', current.id)
      .patch({ isPrimary: true, updatedAt: new Date(ctx.services.now()) })
      .returning('*')
      .first()) as unknown as EmailConnection;
    await audit.record(tx, {
      brandId: brand,
      entityType: 'email_connection',
      entityId: row.id,
      event: 'email_connection.updated',
      changes: [{ field: 'isPrimary', from: false, to: true }],
    });
    return toView(row);
  });
}

/** Deletes it (nothing in the mailbox is touched); when it was primary, the oldest other connection becomes primary. */
export async function remove(ctx: TenantCtx, brandId: string, connectionId: string): Promise<EmailConnectionView> {
  return withTx(ctx, async (tx) => {
    const brand = await lockBrand(tx, brandId);
    const row = await requireConnection(tx, brand, connectionId, true);
    await ofBrand(tx, brand).where('id', row.id).delete();
    if (row.isPrimary) {
      const next = await ofBrand(tx, brand).orderBy('id').select('id').first();
      if (next)
        await ofBrand(tx, brand)
          .where('id', next.id)
          .patch({ isPrimary: true, updatedAt: new Date(ctx.services.now()) });
    }
    await audit.record(tx, { brandId: brand, entityType: 'email_connection', entityId: row.id, event: 'email_connection.deleted', metadata: { email: row.email } });
    return toView(row);
  });
}

// ---------------------------------------------------------------------------------------------
// Taking a mailbox in (flows/mailbox-sync.ts). How far it was taken in is (uid_validity, last_uid);
// last_uid only grows, in the transaction of what each message created (advance).

/** A sync that stopped without a word (its process died) is taken up again after this long. */
const SYNC_STALE_MS = 10 * 60_000;
/** A connection the server could not be reached at is tried again after 1, 2, 4... minutes, at most an hour. */
const RETRY_FIRST_MS = 60_000;
const RETRY_MAX_MS = 3600_000;
const MAX_ERROR_LENGTH = 1000;

/** The connection to sync, its password still sealed. */
export async function findToSync(ctx: TenantCtx, brandId: string, connectionId: string): Promise<EmailConnection> {
  await requireBrand(ctx, brandId);
  return requireConnection(ctx, brandId, connectionId);
}

/** The brand's connections in these states, oldest first. */
export async function ofBrandToSync(ctx: TenantCtx, brandId: string, statuses: readonly ConnectionStatus[]): Promise<EmailConnection[]> {
  await requireBrand(ctx, brandId);
  return ofBrand(ctx, brandId).whereIn('status', statuses).orderBy('id');
}

const one = (ctx: TenantCtx, row: EmailConnection) => ofBrand(ctx, row.brandId).where('id', row.id);

export async function markSyncing(ctx: TenantCtx, row: EmailConnection): Promise<void> {
  await one(ctx, row).patch({ status: 'SYNCING', updatedAt: new Date(ctx.services.now()) });
}

/**
 * Connections of every account due a sync, claimed (SYNCING) so other dispatchers pass them by:
 * ACTIVE ones last synced over `pollSeconds` ago, ERROR ones past their retry_at, and syncs
 * that stopped without a word. A look-out reads them without a lock (a locking read across
 * accounts is refused on a cluster distributed by account), then each is claimed by a conditional
 * update of its own row that tests the same condition again: of two dispatchers, only the first
 * finds it still due.
 */
export async function claimDue(base: BaseCtx, pollSeconds: number, limit: number): Promise<EmailConnection[]> {
  const now = base.services.now();
  const due = (query: QueryBuilder<EmailConnection, EmailConnection[]>) =>
    query.where((d) =>
      d
        .where((q) => q.where('status', 'ACTIVE').where((w) => w.whereNull('lastSyncAt').orWhere('lastSyncAt', '<=', new Date(now - pollSeconds * 1000))))
        .orWhere((q) => q.where('status', 'ERROR').where('retryAt', '<=', new Date(now)))
        .orWhere((q) => q.where('status', 'SYNCING').where('updatedAt', '<=', new Date(now - SYNC_STALE_MS))),
    );
  const seen = await due(EmailConnection.query(base.db)).orderByRaw('coalesce(retry_at, last_sync_at) nulls first').limit(limit).select('accountId', 'livemode', 'brandId', 'id');
  const claimed: EmailConnection[] = [];
  for (const row of seen) {
    const ctx = tenantCtx(base, row.accountId, row.livemode);
    const [won] = (await due(ofBrand(ctx, row.brandId).where('id', row.id))
      .patch({ status: 'SYNCING', updatedAt: new Date(now) })
      .returning('*')) as unknown as EmailConnection[];
    if (won) claimed.push(won);
  }
  return claimed;
}

/** The connection claimed for a sync (SYNCING) if it is ACTIVE and no sync has it; null otherwise. */
export async function claimActive(ctx: TenantCtx, row: EmailConnection): Promise<EmailConnection | null> {
  const [claimed] = await one(ctx, row)
    .where('status', 'ACTIVE')
    .patch({ status: 'SYNCING', updatedAt: new Date(ctx.services.now()) })
    .returning('*');
  return (claimed as EmailConnection | undefined) ?? null;
}

/**
 * The UID a sync starts after: the saved one, or 0 when the folder's UIDVALIDITY is not the saved
 * one (its UIDs name other messages now) or when `full` asks to read it all again.
 */
export async function startingPoint(ctx: TenantCtx, row: EmailConnection, uidValidity: string, full: boolean): Promise<number> {
  const restart = one(ctx, row);
  if (!full) restart.where((q) => q.whereNull('uidValidity').orWhereNot('uidValidity', uidValidity));
  await restart.patch({ uidValidity, lastUid: '0' });
  const current = await one(ctx, row).select('lastUid').first();
  return Number(current?.lastUid ?? 0);
}

/**
 * Saves that the message `uid` was taken in; false when it was already (another sync of the
 * connection got there first, or the folder's UIDVALIDITY changed meanwhile). The row stays
 * locked until ctx's transaction ends: syncs of one connection take turns per message.
 */
export async function advance(ctx: TenantCtx, row: EmailConnection, uidValidity: string, uid: number): Promise<boolean> {
  const moved = await one(ctx, row)
    .where('uidValidity', uidValidity)
    .where('lastUid', '<', uid)
    .patch({ lastUid: String(uid), updatedAt: new Date(ctx.services.now()) });
  return moved > 0;
}

/** The sync reached the server and read the folder: ACTIVE; `complete`: everything there was taken in. */
export async function recordSynced(ctx: TenantCtx, row: EmailConnection, complete: boolean): Promise<void> {
  const now = new Date(ctx.services.now());
  await one(ctx, row).patch({ status: 'ACTIVE', errorMessage: null, failures: 0, retryAt: null, updatedAt: now, ...(complete ? { lastSyncAt: now } : {}) });
}

/**
 * The sync failed. `refused`: the server refused the credentials, DISCONNECTED until someone
 * retries; otherwise ERROR, tried again after a growing pause.
 */
export async function recordFailure(ctx: TenantCtx, row: EmailConnection, failure: { refused: boolean; message: string }): Promise<void> {
  const now = ctx.services.now();
  const failures = row.failures + 1;
  const pause = Math.min(RETRY_FIRST_MS * 2 ** Math.min(failures - 1, 20), RETRY_MAX_MS);
  await one(ctx, row).patch({
    status: failure.refused ? 'DISCONNECTED' : 'ERROR',
    errorMessage: failure.message.slice(0, MAX_ERROR_LENGTH),
    failures,
    retryAt: failure.refused ? null : new Date(now + pause),
    updatedAt: new Date(now),
  });
}

/** The password, opened to log in (the process that connects only). */
export async function secretOf(ctx: BaseCtx, row: Pick<EmailConnection, 'accountId' | 'secret'>): Promise<string> {
  return ctx.services.get(keyringPart).open(row.secret, SECRET_SEAL(row.accountId));
}

/**
 * The refresh token the provider issued in place of the stored one (Microsoft rotates them), sealed
 * before its short transaction; a connection changed meanwhile (a new token given) keeps its own.
 */
export async function replaceRefreshToken(ctx: TenantCtx, row: EmailConnection, refreshToken: string): Promise<void> {
  const secret = await ctx.services.get(keyringPart).seal(refreshToken, SECRET_SEAL(row.accountId));
  await one(ctx, row).where('secret', row.secret).patch({ secret });
}

/** Google's and Microsoft's consent screens: out of reach of a self-hosted server (docs/api.md). */
export function oauthUnavailable(): never {
  throw badRequest(
    "ticketd cannot open Google's or Microsoft's consent screen from where it runs: connect the mailbox over IMAP with an app password (provider IMAP), or with a refresh token obtained with this server's OAuth client (provider GMAIL or OUTLOOK), at POST /v1/brands/{brandId}/email-connections",
    undefined,
    'oauth_unavailable',
  );
}
