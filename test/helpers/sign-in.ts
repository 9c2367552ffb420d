import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { simpleParser, type ParsedMail } from 'mailparser';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import * as members from '../../server/domains/members/service.js';
import type { Services } from '../../server/core/services.js';
import { loginLink } from '../../server/flows/sign-in.js';
import { mailTransport } from '../../server/integrations/mail.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { mailHandler } from '../../server/worker/handlers/mail.js';
import { client, makeBrand, signup, type Reply } from './app.js';
import { testNow } from './clock.js';

/** The dashboard origin the sign-in tests configure (TICKETD_DASHBOARD_ORIGINS). */
export const DASHBOARD = 'https://dash.example.com';

/** Configuration for tests that sign many people in: the dashboard origin, sign-in budgets out of the way. */
export const SIGN_IN_TEST_ENV = {
  TICKETD_DASHBOARD_ORIGINS: DASHBOARD,
  TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000',
  TICKETD_AUTH_RATE_LIMIT_PER_IP_PER_HOUR: '10000',
  TICKETD_AUTH_RATE_LIMIT_PER_EMAIL_PER_HOUR: '10000',
};

let people = 0;
/** A fresh address for a test's person. */
export const addressOf = (who: string) => `${who}-${++people}-${process.pid}@example.com`;

/** An organization with two live brands, its owner, an admin (Ada Admin) and a member (Mo Member) assigned to the first brand only, each signed in. */
export async function teamOf(app: FastifyInstance, services: Services) {
  const ownerEmail = addressOf('owner');
  const owner = await signup(app, ownerEmail);
  const [first, second] = [await makeBrand(owner.live, 'First'), await makeBrand(owner.live, 'Second')];
  const live = tenantCtx(systemCtx(services), owner.accountId, true);
  const admin = await members.add(live, { email: addressOf('admin'), name: 'Ada Admin', role: 'admin' });
  const member = await members.add(live, { email: addressOf('member'), name: 'Mo Member', role: 'member', brandIds: [first.id] });
  const as = async (email: string) => client(app, await signIn(app, services, email));
  return { owner, ownerEmail, first, second, admin, member, asOwner: await as(ownerEmail), asAdmin: await as(admin.email), asMember: await as(member.email) };
}

/** An organization with a brand, its owner (Test Owner), an admin (Ada Admin) and a member (Mo Member), each signed in. */
export async function teamOfThree(app: FastifyInstance, services: Services) {
  const ownerEmail = addressOf('owner');
  const owner = await signup(app, ownerEmail);
  const brand = await makeBrand(owner.live, 'Desk');
  const live = tenantCtx(systemCtx(services), owner.accountId, true);
  const admin = await members.add(live, { email: addressOf('admin'), name: 'Ada Admin', role: 'admin' });
  const member = await members.add(live, { email: addressOf('member'), name: 'Mo Member', role: 'member' });
  const as = async (email: string) => client(app, await sessionToken(app, services, owner.accountId, email));
  return {
    owner,
    ownerEmail,
    brand,
    base: `/v1/brands/${brand.id}`,
    admin,
    member,
    asOwner: await as(ownerEmail),
    asAdmin: await as(admin.email),
    asMember: await as(member.email),
  };
}

const quietLog = { info: () => undefined, error: () => undefined };

/** Delivers the mail due now through the configured transport (file: .eml files under the data dir), as `ticketd start` would. */
export async function deliverMail(services: Services): Promise<void> {
  const transport = mailTransport(services.config);
  // A second ahead of the database clock, so rows just committed are due.
  const dispatcher = new Dispatcher(services, quietLog, null, { now: () => testNow() + 1000, random: () => 0.5, handlers: { mail: mailHandler(transport) } });
  try {
    await dispatcher.deliverDue();
  } finally {
    await dispatcher.stop();
  }
}

/** The mail written to `to`, oldest first (the .eml files ticketd wrote, parsed). */
export async function mailsTo(services: Services, to: string): Promise<ParsedMail[]> {
  const dir = path.join(services.config.dataDir, 'mail', 'outbox');
  if (!existsSync(dir)) return [];
  const parsed = await Promise.all(
    readdirSync(dir)
      .filter((f) => f.endsWith('.eml'))
      .sort()
      .map((f) => simpleParser(readFileSync(path.join(dir, f)))),
  );
  const addressed = (m: ParsedMail) => (Array.isArray(m.to) ? m.to : m.to ? [m.to] : []).some((a) => a.value.some((v) => v.address === to));
  return parsed.filter(addressed);
}

/** The sign-in link in a mail, as a URL. */
export function linkIn(mail: ParsedMail): URL {
  const match = /https?:\/\/\S+\/auth\/callback\?token=\S+/.exec(mail.text ?? '');
  if (!match) throw new Error(`no sign-in link in: ${mail.text}`);
  return new URL(match[0]);
}

/** Delivers the outbox and returns the token of the newest sign-in link mailed to `email`. */
export async function newestLinkToken(services: Services, email: string): Promise<string> {
  await deliverMail(services);
  const mails = await mailsTo(services, email);
  if (!mails.length) throw new Error(`no mail to ${email}`);
  return linkIn(mails[mails.length - 1]!).searchParams.get('token')!;
}

/** Requests from one client address (rate limits count per address). */
export function from(app: FastifyInstance, ip: string) {
  return async (method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> => {
    const res = await app.inject({ method: method as 'GET', url, remoteAddress: ip, headers, ...(body === undefined ? {} : { payload: body as object }) });
    return { status: res.statusCode, body: res.body ? (JSON.parse(res.body) as unknown) : undefined, headers: res.headers };
  };
}

/** Signs `email` in the way the dashboard does: magic link, the link from the mail file, verify. Returns the session token. */
export async function signIn(app: FastifyInstance, services: Services, email: string, extra: { organizationId?: string; ip?: string } = {}): Promise<string> {
  const call = from(app, extra.ip ?? '192.0.2.250');
  const asked = await call('POST', '/v1/auth/magic-link', { email, ...(extra.organizationId ? { organizationId: extra.organizationId } : {}) }, { origin: DASHBOARD });
  if (asked.status !== 200) throw new Error(`magic-link failed: ${asked.status} ${JSON.stringify(asked.body)}`);
  const verified = await client(app)('POST', '/v1/auth/verify', { token: await newestLinkToken(services, email) });
  if (verified.status !== 200) throw new Error(`verify failed: ${verified.status} ${JSON.stringify(verified.body)}`);
  return verified.body.sessionToken as string;
}

/** A session token for `email` in `accountId`, through a printed sign-in link (no mail needed), from a loopback dashboard page. */
export async function sessionToken(app: FastifyInstance, services: Services, accountId: string, email: string): Promise<string> {
  const link = await loginLink(systemCtx(services), email, 'http://localhost:5173', accountId);
  const verified = await client(app)('POST', '/v1/auth/verify', { token: new URL(link.url).searchParams.get('token') });
  if (verified.status !== 200) throw new Error(`verify failed: ${verified.status} ${JSON.stringify(verified.body)}`);
  return verified.body.sessionToken as string;
}
