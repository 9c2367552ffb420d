import t from 'tap';
import { testConfig } from '../helpers/app.js';
import { ratingPageUrl } from '../../server/flows/feedback.js';
import { mailTransport } from '../../server/integrations/mail.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { mailHandler } from '../../server/worker/handlers/mail.js';
import { assertErrorShape, client, makeBrand, makeTicket, mustCreate, servicesOf, signup, testApp } from '../helpers/app.js';
import { DASHBOARD, mailsTo } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

// Satisfaction ratings: GET and POST /v1/feedback/{token} (the dashboard's /rate/[token] page calls
// them), GET and POST /v1/portal/tickets/{ticketId}/feedback, ticketd's own /rate/{token} page,
// the rating mail sent after the brand's delay, and /v1/tickets/team-metrics fed by the ratings.

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** How far the clock of the app and the dispatcher is moved forward. */
let ahead = 0;
const clock = () => testNow() + ahead;

const { app, db } = await testApp(t, { TICKETD_DASHBOARD_ORIGINS: DASHBOARD, TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' }, { clock });
const services = servicesOf(db);
const owner = await signup(app);
const brand = await makeBrand(owner.live, 'Acme <Support>');
const base = `/v1/brands/${brand.id}`;
const members = (await owner.live('GET', '/v1/accounts/me/members')).body.data as { id: string; email: string }[];
const ownerMemberId = members[0]!.id;
const anonymous = client(app);

await owner.live('PATCH', base, { csatEnabled: true, csatType: 'scale5', csatDelayMinutes: 60 });

let customers = 0;
/** A new customer's ticket, assigned to the owner, resolved now; its customer's address. */
async function resolvedTicket(title = 'Printer on fire', where = base, call = owner.live) {
  const email = `customer-${++customers}@example.com`;
  const ticket = await makeTicket(call, where, { title, customerEmail: email, assigneeId: where === base ? ownerMemberId : undefined });
  const res = await call('PATCH', `${where}/tickets/${ticket.id}`, { status: 'resolved' });
  if (res.status !== 200) throw new Error(`resolve failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { ticket, email };
}

/** One dispatcher tick at the test clock: due rating requests are mailed (or cancelled), the outbox delivered to mail files. */
async function tick() {
  const quiet = { info: () => undefined, error: () => undefined };
  const dispatcher = new Dispatcher(services, quiet, null, { now: () => clock() + 1000, random: () => 0.5, handlers: { mail: mailHandler(mailTransport(services.config)) } });
  try {
    return await dispatcher.tick();
  } finally {
    await dispatcher.stop();
  }
}

const TOKEN_IN_LINK = /\/rate\/(fb_[0-9A-Za-z]+)/;

/** The rating link's token in the newest rating mail to `email` (after a tick an hour and a minute on). */
async function mailedToken(email: string): Promise<string> {
  const mails = (await mailsTo(services, email)).filter((m) => TOKEN_IN_LINK.test(m.text ?? ''));
  if (!mails.length) throw new Error(`no rating mail to ${email}`);
  return TOKEN_IN_LINK.exec(mails[mails.length - 1]!.text!)![1]!;
}

async function rowsOf(ticketId: string) {
  return (await db('ticket_feedback').where({ ticket_id: ticketId }).orderBy('id')) as { id: string; status: string; token_hash: string | null; rating: number | null }[];
}

async function dueTick() {
  ahead += 61 * 60_000;
  return tick();
}

t.test('resolving asks for a rating after the delay: one mail with a link to the dashboard page; the page reads the request', async (t) => {
  const { ticket, email } = await resolvedTicket();
  const [row] = await rowsOf(ticket.id);
  t.match(row, { status: 'scheduled', token_hash: null }, 'a request, scheduled, no token yet');

  await tick();
  t.same(await mailsTo(services, email), [], 'nothing before the delay');

  const ticked = await dueTick();
  t.ok(ticked.ratingRequests.sent >= 1, 'the tick mailed it');
  const mails = await mailsTo(services, email);
  t.equal(mails.length, 1, 'one mail');
  const mail = mails[0]!;
  t.match(mail.subject, `[#${ticket.ticketNumber}] Printer on fire`);
  t.match(mail.text, /Acme <Support>/);
  t.match(mail.text, new RegExp(`${DASHBOARD}/rate/fb_`), "the link goes to the dashboard's rating page");
  t.equal(mail.headers.get('x-ticketd-ticket'), ticket.id, 'in the ticket thread');
  const token = await mailedToken(email);
  const [sent] = await rowsOf(ticket.id);
  t.equal(sent!.status, 'sent');
  t.notOk(JSON.stringify(sent).includes(token), 'the token is stored only as a hash');

  const page = await anonymous('GET', `/v1/feedback/${token}`);
  t.equal(page.status, 200);
  t.same(page.body, {
    id: sent!.id,
    object: 'feedback',
    ratingType: 'scale5',
    expiresAt: page.body.expiresAt,
    ticket: { title: 'Printer on fire', ticketNumber: ticket.ticketNumber, publicId: `${(await owner.live('GET', base)).body.ticketPrefix}-${ticket.ticketNumber}` },
    brand: { name: 'Acme <Support>' },
  });
  t.ok(Date.parse(page.body.expiresAt) > clock() + 29 * DAY, 'the link works for 30 days');

  await dueTick();
  t.equal((await mailsTo(services, email)).length, 1, 'a later tick does not mail it again');
});

t.test('a rating is taken once: out of scale refused, then accepted with its comment, audited, announced; a replay is 409', async (t) => {
  await mustCreate(owner.live, `${base}/webhooks`, { url: 'https://93.184.215.14/csat', events: ['ticket.rated'] });
  const { ticket, email } = await resolvedTicket('Slow wifi');
  await dueTick();
  const token = await mailedToken(email);

  for (const rating of [0, 6, -1]) {
    const res = await anonymous('POST', `/v1/feedback/${token}`, { rating });
    assertErrorShape(t, res, 400, 'invalid_rating');
    t.match(res.body.message, /from 1 to 5/);
  }
  assertErrorShape(t, await anonymous('POST', `/v1/feedback/${token}`, { rating: 11 }), 400, 'validation_failed');
  assertErrorShape(t, await anonymous('POST', `/v1/feedback/${token}`, { rating: 2.5 }), 400, 'validation_failed');
  assertErrorShape(t, await anonymous('POST', `/v1/feedback/${token}`, { rating: 4, extra: true }), 400, 'validation_failed');
  assertErrorShape(t, await anonymous('POST', `/v1/feedback/${token}`, { rating: 4, comment: 'x'.repeat(5001) }), 400, 'validation_failed');
  t.equal((await rowsOf(ticket.id))[0]!.status, 'sent', 'refusals change nothing');

  const rated = await anonymous('POST', `/v1/feedback/${token}`, { rating: 4, comment: '  Fixed fast  ' });
  t.equal(rated.status, 200);
  t.same(rated.body, { success: true, message: 'Thank you for your feedback', id: (await rowsOf(ticket.id))[0]!.id });
  t.match((await rowsOf(ticket.id))[0], { status: 'rated', rating: 4 });

  const again = await anonymous('POST', `/v1/feedback/${token}`, { rating: 1 });
  assertErrorShape(t, again, 409, 'feedback_already_submitted');
  t.match(again.body.message, /already submitted/, 'the message the dashboard page looks for');
  const page = await anonymous('GET', `/v1/feedback/${token}`);
  assertErrorShape(t, page, 409, 'feedback_already_submitted');
  t.match((await rowsOf(ticket.id))[0], { rating: 4 }, 'the first rating stands');

  const logs = (await owner.live('GET', `${base}/tickets/${ticket.id}/logs`)).body as { event: string; performerType: string; metadata: Record<string, unknown> }[];
  const entry = logs.find((l) => l.event === 'ticket.rated');
  t.match(entry, { performerType: 'customer', metadata: { rating: 4, ratingType: 'scale5', resolverId: ownerMemberId, hasComment: true } }, 'audited as the customer');
  const events = (await db('outbox').where({ event: 'ticket.rated' }).select('payload')) as { payload: { data: Record<string, unknown> } }[];
  t.equal(events.length, 1, 'one ticket.rated delivery');
  t.match(events[0]!.payload.data, { id: ticket.id, customerEmail: email, feedback: { rating: 4, ratingType: 'scale5', comment: 'Fixed fast', resolverId: ownerMemberId } });
});

t.test('two ratings at once: one is taken, the other is 409', async (t) => {
  const { ticket, email } = await resolvedTicket('Race');
  await dueTick();
  const token = await mailedToken(email);
  const answers = await Promise.all([2, 5, 3, 1].map((rating) => anonymous('POST', `/v1/feedback/${token}`, { rating })));
  t.same(answers.map((a) => a.status).sort(), [200, 409, 409, 409]);
  const rows = await rowsOf(ticket.id);
  t.equal(rows.length, 1);
  t.equal(rows[0]!.rating, [2, 5, 3, 1][answers.findIndex((a) => a.status === 200)], 'the rating of the answer that was taken');
  t.equal((await db('audit_log').where({ ticket_id: ticket.id, event: 'ticket.rated' })).length, 1, 'one audit entry');
});

t.test('unknown, tampered and malformed tokens are 404 "not found"; an expired link is 410 "expired"', async (t) => {
  const { email } = await resolvedTicket('Expiring');
  await dueTick();
  const token = await mailedToken(email);
  const tampered = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
  for (const bad of [tampered, `fb_${'0'.repeat(43)}`, 'fb_short', 'nonsense', encodeURIComponent('fb_<script>')]) {
    for (const [method, body] of [
      ['GET', undefined],
      ['POST', { rating: 3 }],
    ] as const) {
      const res = await anonymous(method, `/v1/feedback/${bad}`, body);
      assertErrorShape(t, res, 404, 'not_found');
      t.match(res.body.message, /not found/);
    }
  }
  ahead += 31 * DAY;
  for (const [method, body] of [
    ['GET', undefined],
    ['POST', { rating: 3 }],
  ] as const) {
    const res = await anonymous(method, `/v1/feedback/${token}`, body);
    assertErrorShape(t, res, 410, 'feedback_expired');
    t.match(res.body.message, /expired/, 'the message the dashboard page looks for');
  }
});

t.test('reopened before the delay: no mail; resolved again: a new request, and the earlier link expires', async (t) => {
  const { ticket, email } = await resolvedTicket('Flaky');
  await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { status: 'open' });
  const ticked = await dueTick();
  t.ok(ticked.ratingRequests.cancelled >= 1, 'cancelled at send time');
  t.same(await mailsTo(services, email), [], 'no mail for a ticket that is open again');
  t.same(
    (await rowsOf(ticket.id)).map((r) => r.status),
    ['cancelled'],
  );

  await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { status: 'resolved' });
  await dueTick();
  const first = await mailedToken(email);
  await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { status: 'pending' });
  await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { status: 'resolved' });
  t.same(
    (await rowsOf(ticket.id)).map((r) => r.status),
    ['cancelled', 'cancelled', 'scheduled'],
    'the new resolution replaces the unrated one',
  );
  const stale = await anonymous('GET', `/v1/feedback/${first}`);
  assertErrorShape(t, stale, 410, 'feedback_expired');
  await dueTick();
  const second = await mailedToken(email);
  t.not(second, first);
  t.equal((await anonymous('GET', `/v1/feedback/${second}`)).status, 200);

  // Every path that resolves asks: a bulk resolve too, once per ticket.
  const bulkOne = await makeTicket(owner.live, base, { title: 'Bulk one', customerEmail: 'bulk-1@example.com' });
  const bulkTwo = await makeTicket(owner.live, base, { title: 'Bulk two', customerEmail: 'bulk-2@example.com' });
  t.equal((await owner.live('POST', `${base}/tickets/bulk`, { action: 'resolve', ticketIds: [bulkOne.id, bulkTwo.id] })).status, 200);
  for (const bulked of [bulkOne, bulkTwo])
    t.same(
      (await rowsOf(bulked.id)).map((r) => r.status),
      ['scheduled'],
      'a bulk resolve asks too',
    );

  // Resolved to closed is the same resolution; closed tickets, spam and deleted tickets are not asked.
  const before = (await rowsOf(ticket.id)).length;
  await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { status: 'closed' });
  t.equal((await rowsOf(ticket.id)).length, before, 'resolved to closed asks nothing new');
  const spam = await makeTicket(owner.live, base, { title: 'Spam', customerEmail: 'spammer@example.com' });
  await owner.live('POST', `${base}/tickets/${spam.id}/spam`, { isSpam: true });
  await owner.live('PATCH', `${base}/tickets/${spam.id}`, { status: 'resolved' });
  t.same(await rowsOf(spam.id), [], 'no request for spam');
  const nobody = await makeTicket(owner.live, base, { title: 'No customer' });
  await owner.live('PATCH', `${base}/tickets/${nobody.id}`, { status: 'resolved' });
  t.same(await rowsOf(nobody.id), [], 'no request without a customer');
});

t.test('a brand that does not ask, or stops asking before the mail goes, sends nothing', async (t) => {
  const quiet = await makeBrand(owner.live, 'Quiet');
  const { ticket } = await resolvedTicket('Not asked', `/v1/brands/${quiet.id}`);
  t.same(await rowsOf(ticket.id), [], 'CSAT off: no request');

  const { ticket: asked, email } = await resolvedTicket('Asked, then not');
  await owner.live('PATCH', base, { csatEnabled: false });
  await dueTick();
  await owner.live('PATCH', base, { csatEnabled: true });
  t.same(await mailsTo(services, email), []);
  t.same(
    (await rowsOf(asked.id)).map((r) => r.status),
    ['cancelled'],
  );
});

t.test("the brand's templates fill in, and a template without {{ratingUrl}} still carries the link", async (t) => {
  await owner.live('PATCH', base, { csatEmailSubject: 'Rate {{ticketTitle}} for {{brandName}}', csatEmailBody: 'Hi! #{{ticketNumber}} is done. Vote: {{ratingUrl}} Bye.' });
  const { ticket, email } = await resolvedTicket('Templated');
  await dueTick();
  const [mail] = await mailsTo(services, email);
  t.equal(mail!.subject, 'Rate Templated for Acme <Support>');
  t.match(mail!.text, new RegExp(`^Hi! #${ticket.ticketNumber} is done\\. Vote: ${DASHBOARD}/rate/fb_\\w+ Bye\\.`));

  await owner.live('PATCH', base, { csatEmailBody: 'Thanks for writing to {{brandName}}.' });
  const { email: second } = await resolvedTicket('No link in the template');
  await dueTick();
  const [other] = await mailsTo(services, second);
  t.match(other!.text, /^Thanks for writing to Acme <Support>\.\n\nRate the help you got: https:\/\/dash\.example\.com\/rate\/fb_\w+/);
  await owner.live('PATCH', base, { csatEmailSubject: null, csatEmailBody: null });
});

t.test('the portal: a customer reads and rates the latest resolution of their own ticket, once; nobody else can', async (t) => {
  const { ticket, email } = await resolvedTicket('From the portal');
  const minted = await mustCreate(owner.live, `${base}/portal/token`, { email });
  const customer = client(app, minted.token as string);
  const read = await customer('GET', `/v1/portal/tickets/${ticket.id}/feedback`);
  t.equal(read.status, 200);
  t.match(read.body, { feedback: { object: 'feedback', ticketId: ticket.id, ratingType: 'scale5', status: 'open', rating: null, expiresAt: null } });

  assertErrorShape(t, await customer('POST', `/v1/portal/tickets/${ticket.id}/feedback`, { rating: 9 }), 400, 'invalid_rating');
  const rated = await customer('POST', `/v1/portal/tickets/${ticket.id}/feedback`, { rating: 2, comment: 'Meh' });
  t.equal(rated.status, 200);
  t.match(rated.body, { status: 'rated', rating: 2, comment: 'Meh', submittedAt: /Z$/ });
  assertErrorShape(t, await customer('POST', `/v1/portal/tickets/${ticket.id}/feedback`, { rating: 5 }), 409, 'feedback_already_submitted');
  t.match((await customer('GET', `/v1/portal/tickets/${ticket.id}/feedback`)).body, { feedback: { status: 'rated', rating: 2 } });

  await dueTick();
  t.same(await mailsTo(services, email), [], 'rated before the delay: no mail');
  const logs = (await owner.live('GET', `${base}/tickets/${ticket.id}/logs`)).body as { event: string; performerType: string; source: string }[];
  t.match(
    logs.find((l) => l.event === 'ticket.rated'),
    { performerType: 'customer', source: 'portal' },
  );

  // Another customer of the same brand, another account's customer, a ticket never resolved.
  const { ticket: others } = await resolvedTicket('Someone else');
  assertErrorShape(t, await customer('GET', `/v1/portal/tickets/${others.id}/feedback`), 404, 'not_found');
  assertErrorShape(t, await customer('POST', `/v1/portal/tickets/${others.id}/feedback`, { rating: 1 }), 404, 'not_found');
  t.same(
    (await rowsOf(others.id)).map((r) => r.status),
    ['scheduled'],
    "the other customer's request is untouched",
  );
  const open = await makeTicket(owner.live, base, { title: 'Still open', customerEmail: email });
  t.same((await customer('GET', `/v1/portal/tickets/${open.id}/feedback`)).body, { feedback: null });
  const none = await customer('POST', `/v1/portal/tickets/${open.id}/feedback`, { rating: 3 });
  assertErrorShape(t, none, 404, 'feedback_not_requested');

  const stranger = await signup(app);
  const strangerBrand = await makeBrand(stranger.live, 'Stranger');
  await stranger.live('PATCH', `/v1/brands/${strangerBrand.id}`, { csatEnabled: true });
  const outsider = client(app, (await mustCreate(stranger.live, `/v1/brands/${strangerBrand.id}/portal/token`, { email })).token as string);
  assertErrorShape(t, await outsider('POST', `/v1/portal/tickets/${ticket.id}/feedback`, { rating: 1 }), 404, 'not_found');
  // An API key or a session is not a portal token.
  t.equal((await owner.live('POST', `/v1/portal/tickets/${ticket.id}/feedback`, { rating: 1 })).status, 401);
});

t.test('team metrics count the ratings of each resolver in the period: count, positive, score', async (t) => {
  ahead = 0; // resolutions are timed by the database's clock: the period must be today's
  const team = await signup(app);
  const desk = await makeBrand(team.live, 'Desk');
  const deskBase = `/v1/brands/${desk.id}`;
  await team.live('PATCH', deskBase, { csatEnabled: true, csatType: 'thumbs', csatDelayMinutes: 0 });
  const ownerId = ((await team.live('GET', '/v1/accounts/me/members')).body.data as { id: string }[])[0]!.id;
  const rate = async (rating: number, assigneeId: string | null) => {
    const email = `rater-${++customers}@example.com`;
    const ticket = await makeTicket(team.live, deskBase, { title: 'Rated', customerEmail: email, ...(assigneeId ? { assigneeId } : {}) });
    await team.live('PATCH', `${deskBase}/tickets/${ticket.id}`, { status: 'resolved' });
    const customer = client(app, (await mustCreate(team.live, `${deskBase}/portal/token`, { email })).token as string);
    const res = await customer('POST', `/v1/portal/tickets/${ticket.id}/feedback`, { rating });
    if (res.status !== 200) throw new Error(`rating failed: ${JSON.stringify(res.body)}`);
  };
  const before = (await team.live('GET', '/v1/tickets/team-metrics')).body.members[0];
  t.match(before, { memberId: ownerId, csatCount: 0, csatPositive: 0, csatScore: null });
  assertErrorShape(t, await anonymous('POST', '/v1/feedback/fb_x', { rating: 'good' }), 400, 'validation_failed');
  await rate(1, ownerId);
  await rate(1, ownerId);
  await rate(-1, ownerId);
  await rate(1, null); // nobody's: counted for no one
  const res = await team.live('GET', '/v1/tickets/team-metrics');
  t.equal(res.status, 200);
  t.match(res.body.members[0], { memberId: ownerId, ticketsResolved: 3, csatCount: 3, csatPositive: 2, csatScore: 67 });
  const past = await team.live('GET', '/v1/tickets/team-metrics?startDate=2020-01-01&endDate=2020-01-31');
  t.match(past.body.members[0], { csatCount: 0, csatScore: null }, 'ratings outside the period are not counted');
});

t.test("ticketd's own rating page: a form for a browser, the rating posted back, pages for what went wrong", async (t) => {
  const { ticket, email } = await resolvedTicket('<b>Bold</b> title');
  await dueTick();
  const token = await mailedToken(email);
  const browser = { accept: 'text/html,application/xhtml+xml' };
  const page = await app.inject({ method: 'GET', url: `/rate/${token}`, headers: browser });
  t.equal(page.statusCode, 200);
  t.match(page.headers['content-type'], /^text\/html/);
  t.match(page.headers['content-security-policy'], /default-src 'none'/);
  t.match(page.body, /How did Acme &lt;Support&gt; do\?/, 'names escaped');
  t.match(page.body, /&lt;b&gt;Bold&lt;\/b&gt; title/);
  t.notOk(page.body.includes('<b>Bold'), 'no markup from a title');
  t.equal((page.body.match(/name="rating"/g) ?? []).length, 5, 'five buttons for scale5');

  const form = { 'content-type': 'application/x-www-form-urlencoded', ...browser };
  const missing = await app.inject({ method: 'POST', url: `/rate/${token}`, headers: form, payload: 'comment=hi' });
  t.equal(missing.statusCode, 400);
  t.match(missing.body, /Choose a rating/);
  const done = await app.inject({ method: 'POST', url: `/rate/${token}`, headers: form, payload: 'rating=5&comment=Great%20help' });
  t.equal(done.statusCode, 200);
  t.match(done.body, /Thank you/);
  t.match((await rowsOf(ticket.id))[0], { status: 'rated', rating: 5 });
  const twice = await app.inject({ method: 'POST', url: `/rate/${token}`, headers: form, payload: 'rating=1' });
  t.equal(twice.statusCode, 409);
  t.match(twice.body, /Already rated/);
  t.match(twice.headers['content-type'], /^text\/html/);
  // A client that does not ask for HTML gets the API's error shape.
  assertErrorShape(t, await anonymous('GET', `/rate/${token}`), 409, 'feedback_already_submitted');
  const unknown = await app.inject({ method: 'GET', url: `/rate/fb_${'1'.repeat(43)}`, headers: browser });
  t.equal(unknown.statusCode, 404);
  t.match(unknown.body, /Link not found/);
});

t.test('the rating link: configured page, else the dashboard, else ticketd itself', async (t) => {
  const token = `fb_${'a'.repeat(43)}`;
  t.equal(ratingPageUrl(testConfig({ TICKETD_DASHBOARD_ORIGINS: 'https://desk.example.com/' }), token), `https://desk.example.com/rate/${token}`);
  t.equal(ratingPageUrl(testConfig({ TICKETD_PUBLIC_URL: 'https://help.example.com' }), token), `https://help.example.com/rate/${token}`);
  t.equal(ratingPageUrl(testConfig({ TICKETD_RATING_PAGE_URL: 'https://shop.example/csat?t={token}' }), token), `https://shop.example/csat?t=${token}`);
  t.throws(() => testConfig({ TICKETD_RATING_PAGE_URL: 'https://shop.example/csat' }), /ratingPageUrl/, 'a page without {token} is refused at start-up');
});

t.test('deleting the brand takes its rating requests along', async (t) => {
  const doomed = await makeBrand(owner.live, 'Doomed');
  await owner.live('PATCH', `/v1/brands/${doomed.id}`, { csatEnabled: true });
  const { ticket } = await resolvedTicket('Gone soon', `/v1/brands/${doomed.id}`);
  t.equal((await rowsOf(ticket.id)).length, 1);
  t.equal((await owner.live('DELETE', `/v1/brands/${doomed.id}?confirm=true`)).status, 200);
  t.same(await rowsOf(ticket.id), []);
});
