import * as audit from '../../core/audit.js';
import { tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../../core/context.js';
import { badRequest, HttpError } from '../../core/errors.js';
import { ID_PREFIX, newId } from '../../core/ids.js';
import { scopeOf } from '../../core/model.js';
import { keyringPart, type SealContext, type SealedColumn } from '../../core/sealed.js';
import { hashSecret } from '../../core/secrets.js';
import { isDomain, normalizeDomain } from '../../core/text.js';
import { authorizationUrl, discover, exchangeCode, newAttemptSecrets, OidcFailure, type AttemptSecrets, type IdentityClaims, type OidcClient } from '../../integrations/oidc.js';
import { SsoAttempt, SsoConnection } from './model.js';
import type { SsoConfigInput, SsoConfigView, SsoStartView } from './schemas.js';

/**
 * An organization's single sign-on (see the single_sign_on migration): its identity provider,
 * configured by the owner, and the sign-ins under way. Talking to the provider is network I/O, so
 * it always happens before or between transactions, never inside one.
 */

/** How long a started sign-in may take to come back. */
export const ATTEMPT_TTL_MS = 10 * 60_000;
/** Where a dashboard starts single sign-on; named in sso_required answers. */
export const START_PATH = '/v1/auth/sso/start';
/** Where the provider sends the browser back: the redirect URI to register at the provider, on ticketd's public URL. */
export const CALLBACK_PATH = '/v1/auth/sso/callback';

export const SEALED_SECRETS: readonly SealedColumn[] = [
  { table: 'sso_connections', column: 'client_secret', purpose: 'sso_connection.client_secret' },
  { table: 'sso_attempts', column: 'secrets', purpose: 'sso_attempt.secrets' },
];
const sealOf = (column: SealedColumn, accountId: string): SealContext => ({ purpose: column.purpose, accountId });
const CLIENT_SECRET = SEALED_SECRETS[0]!;
const ATTEMPT_SECRETS = SEALED_SECRETS[1]!;

export const notConfigured = () =>
  new HttpError(404, 'sso_not_configured', 'Single sign-on is not configured for this organization: its owner sets it up with PUT /v1/auth/organization/sso');

/** The same fact for someone signing in, who is not asking for a resource: 400. */
const notConfiguredForSignIn = () =>
  badRequest(
    'Single sign-on is not configured for this address or organization: sign in with a magic link (POST /v1/auth/magic-link)',
    [{ field: 'email', message: 'has no single sign-on' }],
    'sso_not_configured',
  );

export function toView(row: SsoConnection, redirectUri: string): SsoConfigView {
  return {
    object: 'sso_connection',
    id: row.id,
    organizationId: row.accountId,
    issuer: row.issuer,
    clientId: row.clientId,
    clientSecretSet: true,
    allowedDomains: row.allowedDomains,
    defaultRole: row.defaultRole,
    allowMagicLinks: row.allowMagicLinks,
    redirectUri,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** The organization's connection, or null. */
export async function connectionOf(ctx: TenantCtx): Promise<SsoConnection | null> {
  return (await SsoConnection.scoped(ctx).first()) ?? null;
}

export async function get(ctx: TenantCtx, redirectUri: string): Promise<SsoConfigView> {
  const row = await connectionOf(ctx);
  if (!row) throw notConfigured();
  return toView(row, redirectUri);
}

/** Lower-case, deduplicated domain names; 400 invalid_domain naming the first that is not one. */
function domainsOf(raw: readonly string[]): string[] {
  const domains = [...new Set(raw.map(normalizeDomain))];
  const bad = domains.findIndex((d) => !isDomain(d));
  if (bad >= 0) {
    throw badRequest(
      `allowedDomains: ${raw[bad]} is not a domain name such as example.com`,
      [{ field: `allowedDomains.${bad}`, message: 'must be a domain name' }],
      'invalid_domain',
    );
  }
  return domains;
}

/** Why a provider cannot be used, as the owner configuring it is told. */
function issuerRefused(failure: OidcFailure): HttpError {
  const unreachable = failure.kind === 'unreachable';
  const message = failure.kind === 'refused' ? `${failure.message}: identity providers on private networks need ssoAllowPrivate` : failure.message;
  return badRequest(
    `issuer: ${message}`,
    [{ field: 'issuer', message: unreachable ? 'could not be reached' : 'is not a usable OpenID provider' }],
    unreachable ? 'sso_issuer_unreachable' : 'sso_issuer_invalid',
  );
}

type ConfiguredFields = Pick<SsoConnection, 'issuer' | 'clientId' | 'allowedDomains' | 'defaultRole' | 'allowMagicLinks'>;
const CONFIGURED_FIELDS = ['issuer', 'clientId', 'allowedDomains', 'defaultRole', 'allowMagicLinks'] as const;

/** Serializes changes to one organization's connection (two first configurations would both insert). */
const lockConnection = (tx: TenantCtx) => tx.db.raw('SELECT pg_advisory_xact_lock(hashtext(?))', [`ticketd:sso:${tx.accountId}`]);

/**
 * PUT: sets the whole configuration. The issuer is discovered first (outside any transaction), so
 * a provider that does not answer as one is refused (400) and nothing changes; the issuer kept is
 * the one its discovery document names. Audited as organization.sso_configured (the secret as
 * "changed", never its value); a new issuer or client ends the sign-ins under way.
 */
export async function configure(ctx: TenantCtx, input: SsoConfigInput, redirectUri: string): Promise<SsoConfigView> {
  const allowedDomains = domainsOf(input.allowedDomains);
  const clientId = input.clientId.trim();
  if (!clientId) throw badRequest('clientId must not be blank', [{ field: 'clientId', message: 'must not be blank' }], 'validation_failed');
  const secretRequired = () =>
    badRequest('clientSecret is required to configure single sign-on', [{ field: 'clientSecret', message: 'is required the first time' }], 'validation_failed');
  if (input.clientSecret === undefined && !(await connectionOf(ctx))) throw secretRequired();
  let issuer: string;
  try {
    ({ issuer } = await discover(ctx.services, { issuer: input.issuer, clientId }));
  } catch (err) {
    if (err instanceof OidcFailure) throw issuerRefused(err);
    throw err;
  }
  const sealed = input.clientSecret === undefined ? null : await ctx.services.get(keyringPart).seal(input.clientSecret, sealOf(CLIENT_SECRET, ctx.accountId));
  const fields: ConfiguredFields = { issuer, clientId, allowedDomains, defaultRole: input.defaultRole ?? 'member', allowMagicLinks: input.allowMagicLinks ?? true };
  return withTx(ctx, async (tx) => {
    await lockConnection(tx);
    const current = await connectionOf(tx);
    if (!current && !sealed) throw secretRequired();
    const changes = audit.changesBetween<Partial<ConfiguredFields>>(current ?? {}, fields, CONFIGURED_FIELDS);
    if (current && !changes.length && !sealed) return toView(current, redirectUri);
    const now = new Date(tx.services.now());
    const row = current
      ? ((await SsoConnection.scoped(tx)
          .where('id', current.id)
          .patch({ ...fields, ...(sealed ? { clientSecret: sealed } : {}), updatedAt: now })
          .returning('*')
          .first()) as unknown as SsoConnection)
      : ((await SsoConnection.query(tx.db)
          .insert({ id: newId(ID_PREFIX.ssoConnection), ...scopeOf(tx), ...fields, clientSecret: sealed!, createdAt: now, updatedAt: now })
          .returning('*')) as unknown as SsoConnection);
    // Sign-ins under way were started with another provider or client: they would fail at the exchange.
    if (current && (current.issuer !== row.issuer || current.clientId !== row.clientId)) await SsoAttempt.scoped(tx).where('connectionId', row.id).delete();
    await audit.record(tx, {
      brandId: null,
      entityType: 'organization',
      entityId: tx.accountId,
      event: 'organization.sso_configured',
      changes,
      metadata: { connectionId: row.id, clientSecretChanged: Boolean(sealed) },
    });
    return toView(row, redirectUri);
  });
}

/** DELETE: single sign-on ends (sign-ins under way with it); magic links work again. Audited as organization.sso_removed. */
export async function remove(ctx: TenantCtx): Promise<{ success: true }> {
  return withTx(ctx, async (tx) => {
    await lockConnection(tx);
    const current = await connectionOf(tx);
    if (!current) throw notConfigured();
    await SsoConnection.scoped(tx).where('id', current.id).delete();
    await audit.record(tx, {
      brandId: null,
      entityType: 'organization',
      entityId: tx.accountId,
      event: 'organization.sso_removed',
      metadata: { connectionId: current.id, issuer: current.issuer, clientId: current.clientId, allowedDomains: current.allowedDomains },
    });
    return { success: true as const };
  });
}

/** 400 sso_required when the organization has single sign-on without magic links (403 where the caller is refused rather than mistaken). */
export async function assertMagicLinksAllowed(ctx: TenantCtx, status: 400 | 403 = 400): Promise<void> {
  const row = await connectionOf(ctx);
  if (!row || row.allowMagicLinks) return;
  throw new HttpError(
    status,
    'sso_required',
    `This organization's members sign in with single sign-on: POST ${START_PATH} with { organizationId: "${ctx.accountId}", origin }`,
    undefined,
    { sso: { organizationId: ctx.accountId, startPath: START_PATH } },
  );
}

/** The connection of the organization `accountId`, for someone signing in to it; 400 sso_not_configured otherwise. */
export async function connectionForSignIn(base: BaseCtx, accountId: string): Promise<SsoConnection> {
  const row = await connectionOf(tenantCtx(base, accountId, true));
  if (!row) throw notConfiguredForSignIn();
  return row;
}

/** The connections whose provider may sign in addresses of `domain`, over every organization; 400 sso_not_configured for none. */
export async function connectionsForDomain(base: BaseCtx, domain: string): Promise<SsoConnection[]> {
  const rows = await SsoConnection.query(base.db).whereRaw('allowed_domains @> array[?]::text[]', [domain]).orderBy('id');
  if (!rows.length) throw notConfiguredForSignIn();
  return rows;
}

async function clientOf(ctx: TenantCtx, row: SsoConnection, withSecret: boolean): Promise<OidcClient> {
  const client = { issuer: row.issuer, clientId: row.clientId };
  if (!withSecret) return client;
  return { ...client, clientSecret: await ctx.services.get(keyringPart).open(row.clientSecret, sealOf(CLIENT_SECRET, row.accountId)) };
}

/** The provider failed (unreachable, or no longer answering as one): nothing the person can fix. */
const providerFailed = (failure: OidcFailure) =>
  new HttpError(
    502,
    'sso_provider_unreachable',
    `The organization's identity provider failed: ${failure.message}. Try again later, or ask its owner to check the single sign-on settings`,
  );

/**
 * A sign-in starts: the provider's authorization URL (asked of the provider before the
 * transaction), and the attempt stored under its state's hash with the nonce and PKCE verifier
 * sealed; the organization's expired attempts go at the same time.
 */
export async function beginSignIn(ctx: TenantCtx, row: SsoConnection, origin: string, redirectUri: string, loginHint?: string): Promise<SsoStartView> {
  const secrets = await newAttemptSecrets();
  let url: string;
  try {
    url = await authorizationUrl(ctx.services, await clientOf(ctx, row, false), redirectUri, secrets, loginHint);
  } catch (err) {
    if (err instanceof OidcFailure) throw providerFailed(err);
    throw err;
  }
  const { nonce, codeVerifier } = secrets;
  const sealed = await ctx.services.get(keyringPart).seal(JSON.stringify({ nonce, codeVerifier }), sealOf(ATTEMPT_SECRETS, row.accountId));
  const now = ctx.services.now();
  const expiresAt = new Date(now + ATTEMPT_TTL_MS);
  await withTx(ctx, async (tx) => {
    await SsoAttempt.scoped(tx).where('expiresAt', '<=', new Date(now)).delete();
    await SsoAttempt.query(tx.db).insert({
      id: newId(ID_PREFIX.ssoAttempt),
      ...scopeOf(tx),
      connectionId: row.id,
      stateHash: hashSecret(secrets.state),
      secrets: sealed,
      origin,
      redirectUri,
      createdAt: new Date(now),
      expiresAt,
    });
  });
  return { url, organizationId: row.accountId, expiresAt: expiresAt.toISOString() };
}

/** A callback's attempt: `spent` when this call spent it; otherwise it was used already or expired. */
export interface FoundAttempt {
  attempt: SsoAttempt;
  spent: boolean;
}

/**
 * Spends the attempt of a state (one compare-and-set statement: of two callbacks with the same
 * state, one gets it). An attempt used or expired is still returned, unspent, so its refusal can
 * be sent back to its dashboard and audited; an unknown state is null.
 */
export async function spendAttempt(base: BaseCtx, state: string): Promise<FoundAttempt | null> {
  const stateHash = hashSecret(state);
  const now = new Date(base.services.now());
  const [spent] = (await SsoAttempt.query(base.db)
    .where({ stateHash })
    .whereNull('usedAt')
    .where('expiresAt', '>', now)
    .patch({ usedAt: now })
    .returning('*')) as unknown as SsoAttempt[];
  if (spent) return { attempt: spent, spent: true };
  const seen = await SsoAttempt.query(base.db).where({ stateHash }).first();
  return seen ? { attempt: seen, spent: false } : null;
}

/** The connection an attempt was started with; null once single sign-on was removed. */
export async function connectionOfAttempt(ctx: TenantCtx, attempt: SsoAttempt): Promise<SsoConnection | null> {
  return (await SsoConnection.scoped(ctx).findById(attempt.connectionId)) ?? null;
}

const REFUSALS: Readonly<Record<OidcFailure['kind'], string>> = {
  code_rejected: 'sso_code_rejected',
  token_invalid: 'sso_token_invalid',
  refused: 'sso_provider_unreachable',
  unreachable: 'sso_provider_unreachable',
  invalid_provider: 'sso_provider_unreachable',
};

/**
 * The callback's code exchanged at the provider (network I/O: outside any transaction) with the
 * attempt's PKCE verifier, state and nonce; returns the validated ID token's claims. `query` is the
 * provider's whole answer (code, state, iss…), checked by openid-client. Refusals are 400s whose
 * code says why (sso_code_rejected, sso_token_invalid, sso_provider_unreachable).
 */
export async function exchange(ctx: TenantCtx, row: SsoConnection, attempt: SsoAttempt, state: string, query: Readonly<Record<string, string>>): Promise<IdentityClaims> {
  const opened = JSON.parse(await ctx.services.get(keyringPart).open(attempt.secrets, sealOf(ATTEMPT_SECRETS, attempt.accountId))) as Omit<AttemptSecrets, 'state'>;
  const callbackUrl = new URL(attempt.redirectUri);
  for (const [name, value] of Object.entries(query)) callbackUrl.searchParams.set(name, value);
  try {
    return await exchangeCode(ctx.services, await clientOf(ctx, row, true), callbackUrl, { ...opened, state });
  } catch (err) {
    if (!(err instanceof OidcFailure)) throw err;
    throw badRequest(`Single sign-on failed: ${err.message}`, undefined, REFUSALS[err.kind]);
  }
}
