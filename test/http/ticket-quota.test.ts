import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { systemCtx } from '../../server/core/context.js';
import { packageRoot } from '../../server/core/paths.js';
import { attachmentDepsOf } from '../../server/domains/attachments/service.js';
import { setAccountPlan } from '../../server/domains/billing/service.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { assertErrorShape, client, emptyDir, makeBrand, makeTicket, mustCreate, servicesOf, testApp, type Reply } from '../helpers/app.js';
import { imapConnection, imapServer } from '../helpers/imap.js';
import { aStatementWaitsForALock } from '../helpers/db.js';
import { SIGN_IN_TEST_ENV, sessionToken, teamOfThree } from '../helpers/sign-in.js';

// The ticket allowance of a plan (tickets per billing period) at ticket create: POST
// /v1/brands/{id}/tickets (one statement, batched, and step by step), inbound mail (held over the
// allowance, received when there is room), web forms, and GET /v1/auth/usage's ticketCount.

const ALLOWANCE = 5;
const plan = (slug: string, name: string, price: number, tickets: number | null) => ({
  slug,
  name,
  price,
  currency: 'usd',
  interval: 'month',
  ticketsPerPeriod: tickets,
  brands: null,
  members: null,
  customDomain: false,
});
const configFile = path.join(emptyDir, `ticket-quota-${process.pid}.json`);
writeFileSync(
  configFile,
  JSON.stringify({
    defaultPlan: 'small',
    plans: [plan('small', 'Small', 0, ALLOWANCE), plan('big', 'Big', 4900, 40), plan('tiny', 'Tiny', 0, 2), plan('unlimited', 'Unlimited', 9900, null)],
  }),
);

const SECRET = 'inbound-secret-for-quota-tests-0123';
const DOMAIN = 'inbound.quota.example';
let ahead = 0;
const clock = () => Date.now() + ahead;
const { app, db } = await testApp(
  t,
  {
    ...SIGN_IN_TEST_ENV,
    TICKETD_CONFIG: configFile,
    TICKETD_INBOUND_SECRET: SECRET,
    TICKETD_INBOUND_DOMAIN: DOMAIN,
    TICKETD_MAIL_FROM: 'notifications@mail.quota.example',
    TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true', // the test's IMAP server is on loopback
  },
  { clock },
);
const services = servicesOf(db);
const operator = systemCtx(services);

/** An account on the default (Small) plan with one live brand, its owner's API key and session. */
async function account() {
  const team = await teamOfThree(app, services);
  return { ...team, live: team.owner.live, test: team.owner.test };
}

const usage = async (asOwner: ReturnType<typeof client>) => (await asOwner('GET', '/v1/auth/usage')).body;
const liveTickets = async (accountId: string) => Number((await db('tickets').where({ accountId, livemode: true }).count({ n: '*' }))[0]!.n);

async function fill(call: ReturnType<typeof client>, base: string, n: number) {
  for (let i = 0; i < n; i++) await makeTicket(call, base, { title: `Ticket ${i + 1}` });
}

function assertRefused(t: Test, res: Reply, plan: string, limit: number) {
  assertErrorShape(t, res, 403, 'plan_limit_reached');
  t.match(res.body.message, new RegExp(`The ${plan} plan allows ${limit} tickets per billing period`), 'the message names the plan and its allowance');
}

t.test('creates up to the allowance; the next is refused with 403 plan_limit_reached, naming the plan and the limit', async (t) => {
  const { live, base, asOwner, owner } = await account();
  await fill(live, base, ALLOWANCE);
  t.equal((await usage(asOwner)).ticketCount, ALLOWANCE, 'usage counts every create');

  const refused = await live('POST', `${base}/tickets`, { title: 'One too many' });
  assertRefused(t, refused, 'Small', ALLOWANCE);
  t.match(refused.body.message, /this account has 5/);
  // Step by step (watchers, a new tag): the same answer.
  const stepByStep = await live('POST', `${base}/tickets`, { title: 'With a watcher', watchers: [{ memberId: owner.ownerId }], tags: ['new-tag'] });
  assertRefused(t, stepByStep, 'Small', ALLOWANCE);
  t.equal((await live('GET', `${base}/tags`)).body.data?.length ?? 0, 0, 'the refused create left no tag behind');
  t.equal((await usage(asOwner)).ticketCount, ALLOWANCE, 'refused creates are not counted');
});

t.test('an idempotent replay of a ticket created before the allowance ran out still answers the ticket', async (t) => {
  const { live, base } = await account();
  await fill(live, base, ALLOWANCE - 1);
  const first = await live('POST', `${base}/tickets`, { title: 'Keyed' }, { 'x-idempotency-key': 'quota-replay-1' });
  t.equal(first.status, 201);
  const replay = await live('POST', `${base}/tickets`, { title: 'Keyed' }, { 'x-idempotency-key': 'quota-replay-1' });
  t.equal(replay.status, 200, 'a replay, not a refusal');
  t.equal(replay.body.id, first.body.id);
});

t.test('test mode, spam and comments are not counted', async (t) => {
  const { live, test, base, asOwner } = await account();
  const testBrand = await makeBrand(test, 'Sandbox');
  await fill(test, `/v1/brands/${testBrand.id}`, ALLOWANCE + 2);
  t.equal((await usage(asOwner)).ticketCount, 0, 'test-mode tickets are free');

  await mustCreate(live, `${base}/blocked-sources`, { value: 'spammer@spam.example', reason: 'spam' });
  const spam = await makeTicket(live, base, { title: 'Buy now', customerEmail: 'spammer@spam.example' });
  t.equal(spam.isSpam, true);
  t.equal((await usage(asOwner)).ticketCount, 0, 'a ticket created as spam is not counted');

  await fill(live, base, ALLOWANCE);
  const spamAtLimit = await live('POST', `${base}/tickets`, { title: 'More spam', customerEmail: 'spammer@spam.example' });
  t.equal(spamAtLimit.status, 201, 'spam is still taken in at the limit (it is not billed)');
  const [ticket] = (await live('GET', `${base}/tickets?limit=1`)).body.data;
  const comment = await live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'Still there?' });
  t.equal(comment.status, 201, 'comments are not tickets');
});

t.test('a ticket marked spam leaves the count and makes room; unmarked, it counts again', async (t) => {
  const { live, base, asOwner } = await account();
  await fill(live, base, ALLOWANCE - 1);
  const junk = await makeTicket(live, base, { title: 'Junk' });
  assertRefused(t, await live('POST', `${base}/tickets`, { title: 'Over' }), 'Small', ALLOWANCE);
  t.equal((await live('POST', `${base}/tickets/${junk.id}/spam`, { isSpam: true })).status, 200);
  t.equal((await usage(asOwner)).ticketCount, ALLOWANCE - 1, 'spam is not billed');
  const fits = await live('POST', `${base}/tickets`, { title: 'Fits now' });
  t.equal(fits.status, 201, 'its place is free again');
  t.equal((await live('POST', `${base}/tickets/${junk.id}/spam`, { isSpam: false })).status, 200, 'unmarking is never refused');
  t.equal((await usage(asOwner)).ticketCount, ALLOWANCE + 1, 'and counts it again, over the allowance');
  assertRefused(t, await live('POST', `${base}/tickets`, { title: 'Over again' }), 'Small', ALLOWANCE);
});

t.test('many concurrent creates at the edge of the allowance: exactly the allowance is created, never one over', async (t) => {
  const { live, base, owner, asOwner } = await account();
  const other = await makeBrand(live, 'Other');
  const third = await makeBrand(live, 'Third');
  await fill(live, base, 2);
  const bases = [base, `/v1/brands/${other.id}`, `/v1/brands/${third.id}`];
  // Batched creates in one statement, and every fourth step by step (a watcher), all at once.
  const body = (i: number) => ({ title: `Race ${i}`, customerEmail: `c${i}@example.com`, ...(i % 4 === 0 ? { watchers: [{ memberId: owner.ownerId }] } : {}) });
  const results = await Promise.all(Array.from({ length: 30 }, (_, i) => live('POST', `${bases[i % 3]}/tickets`, body(i))));
  const created = results.filter((r) => r.status === 201).length;
  const refused = results.filter((r) => r.status === 403 && r.body.code === 'plan_limit_reached').length;
  t.equal(created, ALLOWANCE - 2, 'the allowance left, and no more');
  t.equal(refused, 30 - created, 'every other create is refused');
  t.equal(await liveTickets(owner.accountId), ALLOWANCE, 'the database holds exactly the allowance');
  t.equal((await usage(asOwner)).ticketCount, ALLOWANCE);
});

// Far from the allowance each brand counts within a budget granted from the account's allowance
// (so creates of different brands do not wait for each other); these check that budgets never
// let the account over, and that what one brand was granted and did not use goes to another.

t.test('brands share the allowance exactly: what one brand was granted and did not use goes to the next', async (t) => {
  const { live, base, owner, asOwner } = await account();
  await setAccountPlan(operator, owner.accountId, 'big');
  const other = `/v1/brands/${(await makeBrand(live, 'Other')).id}`;
  await fill(live, base, 10);
  let onOther = 0;
  for (;;) {
    const res = await live('POST', `${other}/tickets`, { title: `Other ${onOther + 1}` });
    if (res.status !== 201) {
      assertRefused(t, res, 'Big', 40);
      t.match(res.body.message, /this account has 40/);
      break;
    }
    onOther++;
  }
  t.equal(onOther, 30, 'the second brand gets all the first one left');
  assertRefused(t, await live('POST', `${base}/tickets`, { title: 'First brand again' }), 'Big', 40);
  t.equal((await usage(asOwner)).ticketCount, 40);
  t.equal(await liveTickets(owner.accountId), 40);
});

t.test('a smaller plan mid-period: room granted under the bigger one does not outlast it', async (t) => {
  const { live, base, owner } = await account();
  await setAccountPlan(operator, owner.accountId, 'big');
  await makeTicket(live, base, { title: 'On Big' });
  await setAccountPlan(operator, owner.accountId, 'tiny');
  t.equal((await live('POST', `${base}/tickets`, { title: 'On Tiny' })).status, 201);
  assertRefused(t, await live('POST', `${base}/tickets`, { title: 'Over Tiny' }), 'Tiny', 2);
  t.equal(await liveTickets(owner.accountId), 2);
});

t.test('many concurrent creates over four brands with room for twenty: exactly twenty, never a 5xx', async (t) => {
  const { live, base, owner, asOwner } = await account();
  await setAccountPlan(operator, owner.accountId, 'big');
  const bases = [base, ...(await Promise.all(['Two', 'Three', 'Four'].map(async (name) => `/v1/brands/${(await makeBrand(live, name)).id}`)))];
  // Budgets handed out on every brand first, so the race runs into taking them back.
  for (const b of bases) await fill(live, b, 5);
  const body = (i: number) => ({ title: `Race ${i}`, ...(i % 5 === 0 ? { watchers: [{ memberId: owner.ownerId }] } : {}) });
  const results = await Promise.all(Array.from({ length: 60 }, (_, i) => live('POST', `${bases[i % 4]}/tickets`, body(i))));
  t.same([...new Set(results.map((r) => r.status))].sort(), [201, 403], 'each create is taken or refused');
  t.equal(results.filter((r) => r.status === 201).length, 20, 'the allowance left, and no more');
  t.equal(await liveTickets(owner.accountId), 40);
  t.equal((await usage(asOwner)).ticketCount, 40);
});

t.test('a brand budget taken back while a create waits for it: the create counts the exact way, once', async (t) => {
  const { live, base, brand, owner, asOwner } = await account();
  await setAccountPlan(operator, owner.accountId, 'big');
  await fill(live, base, 2);
  // What another create at the allowance's edge does: every unused budget back to what was used.
  const taking = await db.transaction();
  await taking.raw('update ticket_usage_brands set budget = used where account_id = ? and brand_id = ?', [owner.accountId, brand.id]);
  const pending = live('POST', `${base}/tickets`, { title: 'Waits for its budget' });
  while (!(await aStatementWaitsForALock(db))) {
    await new Promise((r) => setTimeout(r, 10));
  }
  await taking.commit();
  const res = await pending;
  t.equal(res.status, 201, 'still created');
  t.equal((await usage(asOwner)).ticketCount, 3, 'and counted once');
  await fill(live, base, 37);
  assertRefused(t, await live('POST', `${base}/tickets`, { title: 'Over' }), 'Big', 40);
});

t.test('the next billing period has room again; a bigger plan has room at once', async (t) => {
  const { live, base, owner, ownerEmail, asOwner } = await account();
  await fill(live, base, ALLOWANCE);
  assertRefused(t, await live('POST', `${base}/tickets`, { title: 'Over' }), 'Small', ALLOWANCE);

  t.ok(await setAccountPlan(operator, owner.accountId, 'big'), 'the operator moves the account to Big');
  t.equal((await live('POST', `${base}/tickets`, { title: 'On Big' })).status, 201, 'the bigger plan has room');
  t.match(await usage(asOwner), { ticketCount: ALLOWANCE + 1, planId: 'big', planLimit: 40 });
  await setAccountPlan(operator, owner.accountId, 'unlimited');
  await fill(live, base, 3);
  t.equal((await usage(asOwner)).ticketCount, ALLOWANCE + 4, 'an unlimited plan is still counted (usage stays exact across plan changes)');

  await setAccountPlan(operator, owner.accountId, null);
  assertRefused(t, await live('POST', `${base}/tickets`, { title: 'Back on Small' }), 'Small', ALLOWANCE);
  const now = new Date(clock());
  ahead += Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 2) - now.getTime();
  t.teardown(() => {
    ahead = 0;
  });
  // From the first days of a month the next one is over 30 days away, past a session's cap: sign in again there.
  const nextPeriod = await usage(client(app, await sessionToken(app, services, owner.accountId, ownerEmail)));
  t.equal(nextPeriod.ticketCount, 0, 'a new calendar month starts at zero');
  t.equal((await live('POST', `${base}/tickets`, { title: 'Next month' })).status, 201, 'and has room');
});

t.test('allowances configured mid-period: the first count starts from the tickets already created', async (t) => {
  const { live, base, owner, asOwner } = await account();
  await fill(live, base, 3);
  // As if no plan had an allowance when they were created: no count was kept.
  await db('ticket_usage').where({ accountId: owner.accountId }).delete();
  t.equal((await usage(asOwner)).ticketCount, 3, 'usage counts them');
  await fill(live, base, 2);
  t.equal((await usage(asOwner)).ticketCount, ALLOWANCE, 'the kept count starts from them');
  assertRefused(t, await live('POST', `${base}/tickets`, { title: 'Over' }), 'Small', ALLOWANCE);
});

t.test('a web form at the limit answers 403 plan_limit_reached', async (t) => {
  const { live, base } = await account();
  const form = await mustCreate(live, `${base}/forms`, { name: 'Contact us' });
  await fill(live, base, ALLOWANCE);
  const res = await app.inject({
    method: 'POST',
    url: `/v1/forms/${form.token}`,
    remoteAddress: '198.51.100.77',
    payload: { email: 'casey@example.com', name: 'Casey', subject: 'Hello', message: 'Is anyone there?' },
  });
  const reply = { status: res.statusCode, body: JSON.parse(res.body), headers: res.headers };
  assertRefused(t, reply, 'Small', ALLOWANCE);
});

// Inbound mail beyond the allowance is held, not lost.

function message(brandId: string, n: string, subject = 'My printer is on fire', inReplyTo?: string): Buffer {
  let text = readFileSync(path.join(packageRoot, 'test', 'fixtures', 'mail', 'plain.eml')).toString('latin1');
  text = text.replaceAll('{{BRAND}}', brandId).replaceAll('{{DOMAIN}}', DOMAIN).replace('<plain-1@customer.example>', `<quota-${n}@customer.example>`);
  text = text.replace('My printer is on fire', subject);
  if (inReplyTo) text = text.replace('MIME-Version', `In-Reply-To: ${inReplyTo}\nMIME-Version`);
  return Buffer.from(text, 'latin1');
}

async function deliver(raw: Buffer) {
  const res = await app.inject({ method: 'POST', url: '/v1/inbound/email', payload: raw, headers: { authorization: `Bearer ${SECRET}`, 'content-type': 'message/rfc822' } });
  return { status: res.statusCode, body: JSON.parse(res.body) };
}

async function tick() {
  const quiet = { info: () => undefined, error: () => undefined };
  const dispatcher = new Dispatcher(services, quiet, attachmentDepsOf(services), { now: clock });
  try {
    return (await dispatcher.tick()).receivedHeldMail;
  } finally {
    await dispatcher.stop();
  }
}

t.test('inbound mail beyond the allowance is held, and becomes tickets, in order, once the plan has room', async (t) => {
  const { live, base, brand, owner, asOwner } = await account();
  const run = `${process.pid}-${Math.random().toString(36).slice(2)}`;
  const first = await deliver(message(brand.id, `${run}-first`, 'Before the limit'));
  t.match(first.body, { action: 'ticket_created' });
  await fill(live, base, ALLOWANCE - 1);

  const held = await deliver(message(brand.id, `${run}-a`, 'Held one'));
  t.equal(held.status, 200, 'the mail server is told the message was taken');
  t.same(held.body, { action: 'held', brandId: brand.id, reason: 'plan_limit_reached' });
  const again = await deliver(message(brand.id, `${run}-a`, 'Held one'));
  t.match(again.body, { action: 'held', duplicate: true }, 'delivered again, it is the same held message');
  await deliver(message(brand.id, `${run}-b`, 'Held two'));
  t.equal(await liveTickets(owner.accountId), ALLOWANCE, 'no ticket over the allowance');

  const reply = await deliver(message(brand.id, `${run}-reply`, 'Re: Before the limit', `<quota-${run}-first@customer.example>`));
  t.match(reply.body, { action: 'comment_created' }, 'a reply to a ticket is a comment, taken at the limit');

  t.equal(await tick(), 0, 'no room: the messages stay held');
  t.equal(Number((await db('held_inbound_emails').where({ accountId: owner.accountId }).count({ n: '*' }))[0]!.n), 2);

  await setAccountPlan(operator, owner.accountId, 'big');
  t.equal(await tick(), 2, 'room: both are received');
  const all = (await live('GET', `${base}/tickets?limit=100`)).body.data.map((x: { title: string }) => x.title);
  t.ok(all.includes('Held one') && all.includes('Held two'), 'the held messages are tickets now');
  t.ok(all.indexOf('Held two') < all.indexOf('Held one'), 'received in the order they came (newest first in the list)');
  t.equal(Number((await db('held_inbound_emails').where({ accountId: owner.accountId }).count({ n: '*' }))[0]!.n), 0, 'nothing is held any more');
  const redelivered = await deliver(message(brand.id, `${run}-a`, 'Held one'));
  t.match(redelivered.body, { action: 'ticket_created', duplicate: true, ticketId: /^tkt_/ }, 'a late redelivery answers the ticket it became');
  t.equal((await usage(asOwner)).ticketCount, ALLOWANCE + 2);
  t.equal(await tick(), 0, 'a later tick has nothing to do');
});

t.test('held mail waits for the next billing period when the plan stays the same', async (t) => {
  const { live, base, brand, owner } = await account();
  await fill(live, base, ALLOWANCE);
  const run = `${process.pid}-${Math.random().toString(36).slice(2)}`;
  t.match((await deliver(message(brand.id, `${run}-wait`, 'Next month please'))).body, { action: 'held' });
  t.equal(await tick(), 0);
  const now = new Date(clock());
  ahead += Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 2) - now.getTime();
  t.teardown(() => {
    ahead = 0;
  });
  t.equal(await tick(), 1, 'the new period has room');
  t.equal(await liveTickets(owner.accountId), ALLOWANCE + 1);
});

t.test('a mailbox taken in beyond the allowance: the messages past it are held, each once, and the place is saved after all of them', async (t) => {
  const { live, base, brand, owner } = await account();
  const run = `${process.pid}-${Math.random().toString(36).slice(2)}`;
  // More than the allowance in one sync: several are taken in per transaction, and the one that
  // meets the limit sends its group back to be taken in one by one.
  const messages = Array.from({ length: ALLOWANCE + 3 }, (_, i) => message(brand.id, `${run}-imap-${i}`, `Mailbox ${i}`).toString('latin1'));
  const { port, inbox } = await imapServer(t, messages);
  const connection = await mustCreate(live, `${base}/email-connections`, imapConnection(port));
  const synced = await live('POST', `${base}/email-connections/${connection.id}/sync`);
  t.same(synced.body, { ticketsCreated: ALLOWANCE });
  t.equal(await liveTickets(owner.accountId), ALLOWANCE, 'no ticket over the allowance');
  const held = await db('held_inbound_emails').where({ accountId: owner.accountId }).count({ n: '*' });
  t.equal(Number(held[0]!.n), 3, 'the three past it are held');
  t.match(await db('emailConnections').where({ id: connection.id }).first(), { status: 'ACTIVE', lastUid: String(ALLOWANCE + 3) });
  t.ok(
    inbox().every((m) => m.flags.includes('\\Seen')),
    'every message is taken (the held ones are kept by ticketd)',
  );
  t.same((await live('POST', `${base}/email-connections/${connection.id}/sync`)).body, { ticketsCreated: 0 }, 'a second sync takes nothing');
  t.equal(Number((await db('held_inbound_emails').where({ accountId: owner.accountId }).count({ n: '*' }))[0]!.n), 3, 'nothing held twice');
});
