import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import Provider, { type KoaContext } from 'oidc-provider';
import type { Test } from 'tap';
import { request } from 'undici';

/**
 * A real OpenID provider (oidc-provider) on a loopback port of the test process, with one client:
 * the ticketd under test, PKCE required. Login and consent are answered at once by the interaction
 * page, as the person the test names with signInAs (claims it controls, email_verified included),
 * so authorize() walks an authorization URL to the callback URL with a code in four requests.
 *
 * Its signing key can be rotated (a new key published at the same issuer) or swapped for one it
 * does not publish (ID tokens signed with a key its JWKS does not hold, under the published kid).
 */

export interface Person {
  email?: string;
  email_verified?: unknown;
  name?: string;
}

export interface TestProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Who logs in at the next authorization; their subject is derived from the address. */
  signInAs(person: Person): void;
  /** The next authorization is refused by the person (access_denied). */
  denyNext(): void;
  /** Follows an authorization URL through login and consent; returns the URL the provider sends the browser to. */
  authorize(url: string): Promise<URL>;
  /** A new signing key, published in place of the old one at the same issuer. */
  rotateKey(): void;
  /** ID tokens signed from now on with a key the provider does not publish (its JWKS still lists the old one, under the same kid). */
  signWithUnpublishedKey(): void;
  /** Back to signing with the published key. */
  signWithPublishedKey(): void;
}

const CLIENT_ID = 'ticketd-test';
const CLIENT_SECRET = 'client-secret-for-tests';

let keys = 0;
function signingKey(kid = `key-${++keys}`): Record<string, unknown> {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };
}

/** The subject of a person: one per address, as an identity provider keeps one user per account. */
const subjectOf = (person: Person) => `user-${person.email ?? 'anonymous'}`;

export async function startProvider(t: Test, options: { redirectUri: string }): Promise<TestProvider> {
  const people = new Map<string, Person>();
  let next: Person | 'deny' = {};

  const server = http.createServer();
  const sockets = new Set<Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  function makeProvider(key: Record<string, unknown>) {
    const provider = new Provider(issuer, {
      clients: [
        {
          client_id: CLIENT_ID,
          client_secret: CLIENT_SECRET,
          redirect_uris: [options.redirectUri],
          grant_types: ['authorization_code'],
          response_types: ['code'],
          token_endpoint_auth_method: 'client_secret_basic',
        },
      ],
      jwks: { keys: [key] },
      cookies: { keys: ['cookie-key-for-tests'] },
      pkce: { required: () => true },
      // The ID token carries the scope's claims (email, email_verified, name), as most providers' do.
      conformIdTokenClaims: false,
      claims: { email: ['email', 'email_verified'], profile: ['name'] },
      features: { devInteractions: { enabled: false } },
      ttl: { AccessToken: 600, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Session: 600, Grant: 600 },
      async findAccount(_ctx: unknown, sub: string) {
        const person = people.get(sub);
        return person && { accountId: sub, claims: async () => ({ sub, ...person }) };
      },
    });
    // The interaction page: logs the named person in and grants what was asked, at once.
    provider.use(async (ctx: KoaContext, nextMiddleware) => {
      if (!ctx.path.startsWith('/interaction/')) return nextMiddleware();
      const details = await provider.interactionDetails(ctx.req, ctx.res);
      let result: Record<string, unknown>;
      if (next === 'deny') {
        result = { error: 'access_denied', error_description: 'the person said no' };
      } else {
        const accountId = subjectOf(next);
        people.set(accountId, next);
        const grant = new provider.Grant({ accountId, clientId: details.params.client_id });
        grant.addOIDCScope(details.params.scope);
        result = { login: { accountId }, consent: { grantId: await grant.save() } };
      }
      ctx.redirect(await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: false }));
    });
    return provider.callback();
  }

  let published = signingKey();
  let signer = makeProvider(published);
  let publisher = signer;
  server.on('request', (req, res) => (req.url?.startsWith('/jwks') ? publisher : signer)(req, res));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );

  /** One browser: follows redirects on the provider, carrying its cookies, until it leaves for the client's redirect URI. */
  async function authorize(url: string): Promise<URL> {
    const jar = new Map<string, string>();
    let at = new URL(url);
    for (let hop = 0; hop < 6; hop++) {
      const res = await request(at, { headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } });
      await res.body.text();
      for (const cookie of [res.headers['set-cookie'] ?? []].flat()) {
        const [pair] = cookie.split(';');
        const eq = pair!.indexOf('=');
        jar.set(pair!.slice(0, eq), pair!.slice(eq + 1));
      }
      const location = res.headers.location;
      if (typeof location !== 'string') throw new Error(`the provider answered ${res.statusCode} without a redirect at ${at.pathname}`);
      at = new URL(location, at);
      if (at.origin !== issuer) {
        next = {};
        return at;
      }
    }
    throw new Error('too many redirects at the provider');
  }

  return {
    issuer,
    clientId: CLIENT_ID,
    clientSecret: CLIENT_SECRET,
    signInAs(person) {
      next = person;
    },
    denyNext() {
      next = 'deny';
    },
    authorize,
    rotateKey() {
      published = signingKey();
      signer = publisher = makeProvider(published);
    },
    signWithUnpublishedKey() {
      signer = makeProvider(signingKey(published.kid as string));
    },
    signWithPublishedKey() {
      signer = publisher;
    },
  };
}
