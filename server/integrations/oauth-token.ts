import { request } from 'undici';
import type { Config } from '../core/config.js';

/**
 * Access tokens for mailboxes that sign in to IMAP with XOAUTH2 (Google's and Microsoft's): the
 * connection's refresh token exchanged at the provider's token endpoint (RFC 6749 section 6) with
 * the OAuth client the operator configured. ticketd never shows the consent screen; the operator
 * obtains the refresh token with that client and gives it to the connection (docs/api.md, Mail domains and mailboxes).
 */

export type OAuthProvider = 'GMAIL' | 'OUTLOOK';

export interface OAuthClient {
  /** Who the provider is, in messages. */
  label: string;
  clientId: string;
  clientSecret: string;
  tokenUrl: string;
  /** Asked for on refresh: Microsoft issues a token for the scope asked, Google for the one consented to. */
  scope?: string;
}

/** The provider refused the refresh token (revoked, expired, another client's): the mailbox needs a new one. */
export class OAuthRefused extends Error {
  override name = 'OAuthRefused';
}

/** The token endpoint could not be reached, or did not answer with a token. */
export class OAuthFailed extends Error {
  override name = 'OAuthFailed';
}

/** The configured client of a provider, or null when the operator has not configured one. */
export function oauthClientOf(config: Config, provider: OAuthProvider): OAuthClient | null {
  if (provider === 'GMAIL') {
    if (!config.googleClientId || !config.googleClientSecret) return null;
    return { label: 'Google', clientId: config.googleClientId, clientSecret: config.googleClientSecret, tokenUrl: config.googleTokenUrl };
  }
  if (!config.microsoftClientId || !config.microsoftClientSecret) return null;
  return {
    label: 'Microsoft',
    clientId: config.microsoftClientId,
    clientSecret: config.microsoftClientSecret,
    tokenUrl: config.microsoftTokenUrl,
    scope: 'https://outlook.office.com/IMAP.AccessAsUser.All offline_access',
  };
}

/** An access token for the refresh token; `refreshToken` when the provider issued a new one (Microsoft rotates them). */
export async function refreshAccess(client: OAuthClient, refreshToken: string, timeoutMs: number): Promise<{ accessToken: string; refreshToken?: string }> {
  const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client.clientId, client_secret: client.clientSecret });
  if (client.scope) form.set('scope', client.scope);
  let status: number;
  let text: string;
  try {
    const res = await request(client.tokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: form.toString(),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    status = res.statusCode;
    text = await res.body.text();
  } catch (err) {
    throw new OAuthFailed(`${client.label}'s token endpoint could not be reached (${(err as Error).message})`);
  }
  let body: { access_token?: unknown; refresh_token?: unknown; error?: unknown; error_description?: unknown } = {};
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    // Not JSON: judged by its status alone.
  }
  // invalid_grant and its kin come as 400 (401 for a bad client): a new refresh token, or client, is needed.
  if (status === 400 || status === 401) {
    const why = [body.error, body.error_description].filter((s) => typeof s === 'string' && s).join(': ');
    throw new OAuthRefused(`${client.label} refused the refresh token${why ? ` (${why})` : ''}`);
  }
  if (status !== 200 || typeof body.access_token !== 'string' || !body.access_token) {
    throw new OAuthFailed(`${client.label}'s token endpoint answered ${status} without an access token`);
  }
  return { accessToken: body.access_token, ...(typeof body.refresh_token === 'string' && body.refresh_token ? { refreshToken: body.refresh_token } : {}) };
}
