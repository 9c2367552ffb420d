import net from 'node:net';
import ipaddr from 'ipaddr.js';
import type * as Oidc from 'openid-client';
import { Agent, fetch } from 'undici';
import type { Config } from '../core/config.js';
import { assertPublicHost, hostOf, OutboundRefused, publicLookup } from '../core/outbound.js';
import { part, type Services } from '../core/services.js';

/**
 * OpenID Connect with an organization's identity provider, through openid-client: discovery, the
 * authorization URL (PKCE S256, state, nonce) and the code exchange, whose ID token openid-client
 * validates (signature against the provider's published keys, issuer, audience, nonce, expiry).
 *
 * Every request obeys ticketd's outbound rules (core/outbound.ts): public addresses only unless
 * ssoAllowPrivate, judged on the address connected to, within ssoTimeoutMs. Nothing is kept between
 * sign-ins: each discovers the provider and reads its keys afresh, so keys the provider rotated are
 * believed at once (a sign-in is rare next to the three small requests it costs).
 */

export interface OidcClient {
  issuer: string;
  clientId: string;
  /** Only the code exchange authenticates; discovery and the authorization URL need no secret. */
  clientSecret?: string;
}

/** What went wrong, as the callers tell it apart. */
export type OidcFailureKind = 'refused' | 'unreachable' | 'invalid_provider' | 'code_rejected' | 'token_invalid';

export class OidcFailure extends Error {
  override name = 'OidcFailure';
  constructor(
    readonly kind: OidcFailureKind,
    message: string,
  ) {
    super(message);
  }
}

/** openid-client, loaded on first use (Node keeps it after): a CLI command or a process that never signs anyone in does not pay for it. */
const openidClient = () => import('openid-client');

/** The claims ticketd asks for: who the person is, their address and whether the provider checked it. */
const SCOPE = 'openid email profile';

/** The pool of connections to identity providers; a new connection resolves through publicLookup unless private addresses are allowed. */
const agentPart = part(
  'oidc.agent',
  ({ config }) =>
    new Agent({
      connect: { timeout: config.ssoTimeoutMs, ...(config.ssoAllowPrivate ? {} : { lookup: publicLookup }) },
      headersTimeout: config.ssoTimeoutMs,
      bodyTimeout: config.ssoTimeoutMs,
    }),
  (agent) => agent.close(),
);

const isLoopback = (host: string) => host === 'localhost' || (net.isIP(host) > 0 && ipaddr.process(host).range() === 'loopback');

/** Plain http only to a loopback address, and only with ssoAllowPrivate: an identity provider on this very machine. */
function httpAllowed(url: URL, config: Pick<Config, 'ssoAllowPrivate'>): boolean {
  return url.protocol === 'http:' && config.ssoAllowPrivate && isLoopback(hostOf(url));
}

/** The issuer as a URL ticketd may call: https (see httpAllowed), no query, fragment or credentials. */
export function issuerUrl(raw: string, config: Pick<Config, 'ssoAllowPrivate'>): URL {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new OidcFailure('invalid_provider', 'the issuer must be an absolute https:// URL, such as https://login.example.com');
  }
  if (url.search || url.hash || url.username || url.password) throw new OidcFailure('invalid_provider', 'the issuer must be a URL without query, fragment or credentials');
  if (url.protocol !== 'https:' && !httpAllowed(url, config)) {
    throw new OidcFailure('invalid_provider', 'the issuer must be an https:// URL (http:// only to a loopback address, with ssoAllowPrivate)');
  }
  return url;
}

/** openid-client's fetch: through the guarded pool, and refused before connecting to a non-public IP literal or over plain http. */
function guardedFetch(services: Services): Oidc.CustomFetch {
  const { config } = services;
  return async (url, options) => {
    const target = new URL(url);
    if (target.protocol !== 'https:' && !httpAllowed(target, config)) throw new OidcFailure('refused', `${target.origin} is not https`);
    // IP literals never go through lookup: judged here.
    if (net.isIP(hostOf(target))) await assertPublicHost(target, config.ssoAllowPrivate);
    const res = await fetch(url, { ...options, body: options.body as never, dispatcher: services.get(agentPart) });
    return res as unknown as Response;
  };
}

/** client_secret_basic, the specification's default, unless the provider says it takes client_secret_post only. */
function clientAuth(oidc: typeof Oidc, secret: string | undefined): Oidc.ClientAuth {
  if (secret === undefined) return oidc.None();
  return (as, client, body, headers) => {
    const methods = as.token_endpoint_auth_methods_supported;
    const postOnly = methods !== undefined && !methods.includes('client_secret_basic') && methods.includes('client_secret_post');
    (postOnly ? oidc.ClientSecretPost(secret) : oidc.ClientSecretBasic(secret))(as, client, body, headers);
  };
}

/** An error and the errors it wraps (openid-client and undici keep the original as the cause). */
function* causes(err: unknown): Generator<unknown> {
  for (let e = err; e; e = (e as { cause?: unknown }).cause) yield e;
}

/** Failures that mean the ID token (or the answer carrying it) does not check out. */
const TOKEN_CHECKS: ReadonlySet<string> = new Set([
  'OAUTH_INVALID_RESPONSE',
  'OAUTH_JWT_CLAIM_COMPARISON_FAILED',
  'OAUTH_JWT_TIMESTAMP_CHECK_FAILED',
  'OAUTH_KEY_SELECTION_FAILED',
  'OAUTH_JSON_ATTRIBUTE_COMPARISON_FAILED',
  'OAUTH_UNSUPPORTED_OPERATION',
  'OAUTH_PARSE_ERROR',
]);

/** A status the provider answered with instead of what was asked (openid-client keeps the Response as the cause). */
function answeredStatus(err: unknown): number | null {
  for (const e of causes(err)) if (e instanceof Response || (e as { constructor?: { name?: string } })?.constructor?.name === 'Response') return (e as Response).status;
  return null;
}

/** openid-client's (and the network's) errors as the kinds callers tell apart; `exchange`: the code exchange, else discovery. */
function failureOf(oidc: typeof Oidc, err: unknown, exchange: boolean): OidcFailure {
  for (const e of causes(err)) {
    if (e instanceof OidcFailure) return e;
    if (e instanceof OutboundRefused) return new OidcFailure('refused', e.message);
    if (e instanceof oidc.ResponseBodyError)
      return new OidcFailure('code_rejected', `the provider refused the code (${e.error}${e.error_description ? `: ${e.error_description}` : ''})`);
  }
  const code = (err as { code?: unknown }).code;
  const message = (err as Error).message ?? String(err);
  const status = answeredStatus(err);
  // No answer (the network's errors carry no openid-client code), a time-out, or the provider's own failure: it may work later.
  const noAnswer = status === null && (typeof code !== 'string' || code === 'OAUTH_TIMEOUT' || code === 'OAUTH_ABORT');
  if (noAnswer || (status !== null && status >= 500)) return new OidcFailure('unreachable', `the identity provider could not be reached (${message})`);
  if (exchange) return TOKEN_CHECKS.has(String(code)) ? new OidcFailure('token_invalid', message) : new OidcFailure('code_rejected', message);
  return new OidcFailure('invalid_provider', `the issuer does not answer as an OpenID provider (${message}${status ? `, HTTP ${status}` : ''})`);
}

/** The provider's metadata, discovered from its issuer (throws OidcFailure). */
async function configuration(oidc: typeof Oidc, services: Services, client: OidcClient, exchange = false): Promise<Oidc.Configuration> {
  const url = issuerUrl(client.issuer, services.config);
  try {
    return await oidc.discovery(url, client.clientId, undefined, clientAuth(oidc, client.clientSecret), {
      [oidc.customFetch]: guardedFetch(services),
      timeout: Math.ceil(services.config.ssoTimeoutMs / 1000),
      execute: [
        // The ID token's signature is checked against the provider's published keys even though it
        // comes straight from the token endpoint (the specification lets TLS stand in for it).
        oidc.enableNonRepudiationChecks,
        // openid-client refuses plain http unless told; issuerUrl allowed it only to loopback.
        ...(url.protocol === 'http:' ? [oidc.allowInsecureRequests] : []),
      ],
    });
  } catch (err) {
    throw failureOf(oidc, err, exchange);
  }
}

/** The issuer as the provider names itself: what to store, since its ID tokens must carry exactly that. */
export async function discover(services: Services, client: OidcClient): Promise<{ issuer: string }> {
  const config = await configuration(await openidClient(), services, client);
  return { issuer: config.serverMetadata().issuer };
}

/** A sign-in's one-time values: the state (its key at the callback), the ID token's nonce and the PKCE verifier. */
export interface AttemptSecrets {
  state: string;
  nonce: string;
  codeVerifier: string;
}

export async function newAttemptSecrets(): Promise<AttemptSecrets> {
  const oidc = await openidClient();
  return { state: oidc.randomState(), nonce: oidc.randomNonce(), codeVerifier: oidc.randomPKCECodeVerifier() };
}

/** Where to send the person: the provider's authorization endpoint with the attempt's PKCE challenge (S256), state and nonce. */
export async function authorizationUrl(services: Services, client: OidcClient, redirectUri: string, secrets: AttemptSecrets, loginHint?: string): Promise<string> {
  const oidc = await openidClient();
  const config = await configuration(oidc, services, client);
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: redirectUri,
    scope: SCOPE,
    code_challenge: await oidc.calculatePKCECodeChallenge(secrets.codeVerifier),
    code_challenge_method: 'S256',
    state: secrets.state,
    nonce: secrets.nonce,
    ...(loginHint ? { login_hint: loginHint } : {}),
  });
  return url.href;
}

/** What a validated ID token says of the person. */
export interface IdentityClaims {
  subject: string;
  email: string | null;
  /** Only a literal true counts. */
  emailVerified: boolean;
  name: string | null;
}

/**
 * Exchanges the code the provider sent to `callbackUrl` (the redirect URI with the provider's
 * query) for tokens, with the attempt's PKCE verifier, state and nonce; the ID token is validated
 * by openid-client. Throws OidcFailure.
 */
export async function exchangeCode(services: Services, client: OidcClient, callbackUrl: URL, secrets: AttemptSecrets): Promise<IdentityClaims> {
  const oidc = await openidClient();
  const config = await configuration(oidc, services, client, true);
  let claims: Oidc.IDToken | undefined;
  try {
    const tokens = await oidc.authorizationCodeGrant(config, callbackUrl, {
      pkceCodeVerifier: secrets.codeVerifier,
      expectedState: secrets.state,
      expectedNonce: secrets.nonce,
      idTokenExpected: true,
    });
    claims = tokens.claims();
  } catch (err) {
    throw failureOf(oidc, err, true);
  }
  if (!claims) throw new OidcFailure('token_invalid', 'the provider answered without an ID token');
  return {
    subject: claims.sub,
    email: typeof claims.email === 'string' ? claims.email : null,
    emailVerified: claims.email_verified === true,
    name: typeof claims.name === 'string' && claims.name.trim() ? claims.name.trim() : null,
  };
}
