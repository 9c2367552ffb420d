import t from 'tap';
import { systemCtx } from '../../server/core/context.js';
import { HttpError } from '../../server/core/errors.js';
import { attachmentDepsOf } from '../../server/domains/attachments/service.js';
import { requireForm, submit } from '../../server/flows/form-submit.js';
import { assertErrorShape, makeBrand, mustCreate, ownerWithBrand, servicesOf, signup, testApp, type Reply } from '../helpers/app.js';
import { testNow } from '../helpers/clock.js';

/**
 * The public intake of web forms, POST /v1/forms/{token}: what a customer's browser (or a bot)
 * sees, and what the brand then finds. Each test posts from addresses of its own: the form
 * budgets count per address.
 */

const { app, db } = await testApp(t, {
  TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000',
  TICKETD_FORM_RATE_LIMIT_PER_IP_PER_HOUR: '5',
  TICKETD_FORM_RATE_LIMIT_PER_FORM_PER_HOUR: '8',
  // The dashboard's origin only: the public form route answers every origin anyway.
  TICKETD_CORS_ORIGINS: 'https://dash.example.com',
});

let addressSeq = 0;
/** A client address no other test uses. */
const newAddress = () => `198.51.100.${++addressSeq}`;

interface PostOptions {
  ip?: string;
  headers?: Record<string, string>;
}

/** A submission without credentials: an object is sent as JSON, a string as is (with the content type given). */
async function post(token: string, body: unknown, { ip = newAddress(), headers = {} }: PostOptions = {}): Promise<Reply> {
  const res = await app.inject({
    method: 'POST',
    url: `/v1/forms/${token}`,
    remoteAddress: ip,
    headers,
    ...(body === undefined ? {} : { payload: body as string | object }),
  });
  let parsed: unknown = res.body;
  try {
    parsed = res.body ? JSON.parse(res.body) : undefined;
  } catch {
    /* not JSON */
  }
  return { status: res.statusCode, body: parsed, headers: res.headers };
}

const urlencoded = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
const FORM_POST = { 'content-type': 'application/x-www-form-urlencoded' };
const BOUNDARY = 'form-test-boundary';
function multipartBody(fields: Record<string, string>, files: { name: string; filename: string; type: string; content: string }[] = []): string {
  const parts = Object.entries(fields).map(([k, v]) => `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`);
  for (const f of files)
    parts.push(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${f.name}"; filename="${f.filename}"\r\nContent-Type: ${f.type}\r\n\r\n${f.content}\r\n`);
  return `${parts.join('')}--${BOUNDARY}--\r\n`;
}
const MULTIPART = { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` };

const GOOD = { email: 'Customer@Example.com', name: 'Casey Customer', subject: 'My order  never came', message: 'Order 1234 is two weeks late.' };

async function setup(form: Record<string, unknown> = {}) {
  const { owner, brand, base } = await ownerWithBrand(app);
  const created = await mustCreate(owner.live, `${base}/forms`, { name: 'Contact us', ...form });
  const tickets = async () => (await owner.live('GET', `${base}/tickets?status=all&limit=100`)).body.data as Record<string, unknown>[];
  const spam = async () => (await owner.live('GET', `${base}/tickets?isSpam=true&limit=100`)).body.data as Record<string, unknown>[];
  const formNow = async () => (await owner.live('GET', `${base}/forms/${created.id}`)).body;
  return { owner, brand, base, form: created, token: created.token as string, tickets, spam, formNow };
}

t.test('a JSON submission creates a web ticket through ticket create: customer, audit entry, webhook, count', async (t) => {
  const { owner, base, form, token, tickets, formNow } = await setup({ thankYouMessage: 'Thanks, we will be in touch.' });
  const hook = await mustCreate(owner.live, `${base}/webhooks`, { url: 'https://93.184.215.14/hook', events: ['ticket.created'] });

  const res = await post(token, GOOD, { headers: { origin: 'https://shop.example', referer: 'https://shop.example/contact' } });
  t.equal(res.status, 200, JSON.stringify(res.body));
  t.same(Object.keys(res.body).sort(), ['message', 'success', 'ticket']);
  t.match(res.body, { success: true, ticket: { ticketNumber: Number }, message: 'Thanks, we will be in touch.' });

  const [ticket] = await tickets();
  t.match(ticket, {
    ticketNumber: res.body.ticket.ticketNumber,
    title: 'My order never came',
    body: 'Order 1234 is two weeks late.',
    source: 'web',
    sourceId: form.id,
    sourceData: { formId: form.id, formName: 'Contact us', origin: 'https://shop.example', pageUrl: 'https://shop.example/contact' },
    isSpam: false,
    status: 'open',
  });
  const full = (await owner.live('GET', `${base}/tickets/${ticket!.id}`)).body;
  t.match(full.customer, { email: 'customer@example.com', name: 'Casey Customer' }, 'the sender is the customer');
  const contacts = (await owner.live('GET', `${base}/contacts`)).body.data;
  t.match(contacts, [{ email: 'customer@example.com', name: 'Casey Customer' }], 'and a contact of the brand');

  const logs = (await owner.live('GET', `${base}/logs?event=ticket.created`)).body.data;
  t.match(
    logs,
    [{ entityId: ticket!.id, performerType: 'customer', performedBy: { name: 'Casey Customer <customer@example.com>' }, source: 'web' }],
    'audited as the customer, from the web',
  );
  const deliveries = (await owner.live('GET', `${base}/webhooks/${hook.id}/deliveries`)).body;
  t.match(deliveries, [{ event: 'ticket.created', payload: { data: { id: ticket!.id } } }], 'ticket.created went to the outbox');

  const counted = await formNow();
  t.equal(counted.submissionCount, 1);
  t.ok(Date.parse(counted.lastSubmissionAt) > testNow() - 60_000, 'lastSubmissionAt is now');
});

t.test('a browser form post (urlencoded) is redirected to successUrl; asked for JSON, it gets JSON', async (t) => {
  const { token, tickets } = await setup({ successUrl: 'https://shop.example/thanks' });
  const page = await post(token, urlencoded(GOOD), { headers: FORM_POST });
  t.equal(page.status, 303);
  t.equal(page.headers.location, 'https://shop.example/thanks');

  const json = await post(token, urlencoded({ ...GOOD, subject: 'Second' }), { headers: { ...FORM_POST, accept: 'application/json' } });
  t.equal(json.status, 200);
  t.match(json.body, { success: true, ticket: { ticketNumber: Number } });

  const titles = (await tickets()).map((x) => x.title).sort();
  t.same(titles, ['My order never came', 'Second']);
});

t.test('without successUrl a browser form post gets the JSON answer', async (t) => {
  const { token, tickets } = await setup();
  const res = await post(token, urlencoded(GOOD), { headers: FORM_POST });
  t.equal(res.status, 200);
  t.match(res.body, { success: true, ticket: { ticketNumber: Number }, message: null });
  t.equal((await tickets()).length, 1);
});

t.test('multipart: the dashboard embed code sends text fields and attachments; an empty file input is skipped', async (t) => {
  const { owner, base, token, tickets } = await setup({ successUrl: 'https://shop.example/thanks' });
  const body = multipartBody(GOOD, [
    { name: 'attachments', filename: 'receipt.txt', type: 'text/plain', content: 'paid in full' },
    { name: 'attachments', filename: '', type: 'application/octet-stream', content: '' },
  ]);
  const res = await post(token, body, { headers: { ...MULTIPART, accept: 'application/json' } });
  t.equal(res.status, 200, JSON.stringify(res.body));
  const [ticket] = await tickets();
  t.match(ticket, { title: 'My order never came', source: 'web' });
  const files = (await owner.live('GET', `${base}/tickets/${ticket!.id}/attachments`)).body;
  t.match(files, [{ filename: 'receipt.txt', status: 'UPLOADED', size: 12 }], 'one attachment, stored with the ticket');
  t.equal(files.length, 1);

  const page = await post(token, multipartBody({ ...GOOD, subject: 'Another' }), { headers: MULTIPART });
  t.equal(page.status, 303, 'a page post with multipart is redirected too');
});

t.test('missing or invalid fields: 400 naming each field, nothing created', async (t) => {
  const { token, tickets, formNow } = await setup();
  const empty = await post(token, {});
  assertErrorShape(t, empty, 400, 'invalid_submission');
  t.same(empty.body.errors.map((e: { field: string }) => e.field).sort(), ['email', 'message', 'subject']);

  const blank = await post(token, urlencoded({ email: 'a@example.com', subject: '   ', message: 'hi' }), { headers: FORM_POST });
  assertErrorShape(t, blank, 400, 'invalid_submission');
  t.match(blank.body.errors, [{ field: 'subject', message: 'is required' }]);

  assertErrorShape(t, await post(token, { ...GOOD, email: 'not-an-address' }), 400, 'invalid_submission');
  assertErrorShape(t, await post(token, { ...GOOD, subject: 'x'.repeat(501) }), 400, 'validation_failed');
  assertErrorShape(t, await post(token, { ...GOOD, subject: ['two', 'subjects'] }), 400, 'validation_failed');
  assertErrorShape(t, await post(token, urlencoded({ ...GOOD }) + '&subject=again', { headers: FORM_POST }), 400, 'validation_failed');
  assertErrorShape(t, await post(token, undefined), 400, 'invalid_submission');
  assertErrorShape(t, await post(token, '{"email":', { headers: { 'content-type': 'application/json' } }), 400, 'invalid_json');

  t.equal((await tickets()).length, 0, 'no ticket');
  t.equal((await formNow()).submissionCount, 0, 'not counted');
});

t.test('a refused browser form post goes to errorUrl with the error code; JSON callers still get the error shape', async (t) => {
  const { token, tickets } = await setup({ successUrl: 'https://shop.example/thanks', errorUrl: 'https://shop.example/oops?lang=en' });
  const page = await post(token, urlencoded({ email: 'a@example.com' }), { headers: FORM_POST });
  t.equal(page.status, 303);
  t.equal(page.headers.location, 'https://shop.example/oops?lang=en&error=invalid_submission');
  assertErrorShape(t, await post(token, urlencoded({ email: 'a@example.com' }), { headers: { ...FORM_POST, accept: 'application/json' } }), 400, 'invalid_submission');
  const twice = await post(token, `${urlencoded(GOOD)}&subject=again`, { headers: FORM_POST });
  t.equal(twice.headers.location, 'https://shop.example/oops?lang=en&error=validation_failed', 'a body that fails its schema goes there too');
  t.equal((await tickets()).length, 0);
});

t.test('unknown, regenerated, disabled and deleted forms: 404, nothing created', async (t) => {
  const { owner, base, form, token, tickets } = await setup();
  assertErrorShape(t, await post(`ft_${'A'.repeat(43)}`, GOOD), 404, 'form_not_found');
  assertErrorShape(t, await post(`ft_${'A'.repeat(43)}`, { subject: 42 }), 404, 'form_not_found');
  assertErrorShape(t, await post('not-a-token', GOOD), 404, 'form_not_found');

  const regenerated = await owner.live('POST', `${base}/forms/${form.id}/regenerate`);
  t.equal(regenerated.status, 200);
  t.not(regenerated.body.token, token, 'a new token');
  assertErrorShape(t, await post(token, GOOD), 404, 'form_not_found');
  t.equal((await post(regenerated.body.token, GOOD)).status, 200, 'the new token works');

  await owner.live('PATCH', `${base}/forms/${form.id}`, { enabled: false });
  assertErrorShape(t, await post(regenerated.body.token, GOOD), 404, 'form_not_found');
  await owner.live('PATCH', `${base}/forms/${form.id}`, { enabled: true });
  t.equal((await post(regenerated.body.token, { ...GOOD, subject: 'Enabled again' })).status, 200);

  await owner.live('DELETE', `${base}/forms/${form.id}`);
  assertErrorShape(t, await post(regenerated.body.token, GOOD), 404, 'form_not_found');
  t.equal((await tickets()).length, 2, 'only the two accepted submissions made tickets');
});

t.test('a form regenerated or disabled while its submission is under way refuses it, and nothing is kept', async (t) => {
  const { owner, base, form, token, tickets, formNow } = await setup();
  const services = servicesOf(db);
  const found = await requireForm(systemCtx(services), token);
  await owner.live('POST', `${base}/forms/${form.id}/regenerate`);
  const file = { filename: 'a.txt', contentType: 'text/plain', content: Buffer.from('abc') };
  const refused = await submit(systemCtx(services), { attachments: attachmentDepsOf(services) }, found, GOOD, [file], { origin: null, pageUrl: null }).catch((err: unknown) => err);
  t.ok(refused instanceof HttpError && refused.statusCode === 404 && refused.code === 'form_not_found', 'refused with 404');
  t.equal((await tickets()).length, 0, 'no ticket');
  t.equal((await formNow()).submissionCount, 0, 'not counted');
});

t.test('a filled honeypot is answered as accepted, and creates nothing', async (t) => {
  const { token, tickets, formNow } = await setup({ honeypotField: 'website', thankYouMessage: 'Thanks!' });
  const bot = await post(token, { ...GOOD, website: 'http://spam.example' });
  t.equal(bot.status, 200);
  t.same(bot.body, { success: true, message: 'Thanks!' });
  t.equal((await tickets()).length, 0, 'no ticket, not even a spam one');
  t.equal((await formNow()).submissionCount, 0);

  const person = await post(token, { ...GOOD, website: '' });
  t.equal(person.status, 200);
  t.match(person.body, { ticket: { ticketNumber: Number } }, 'an empty honeypot is a person');
  t.equal((await tickets()).length, 1);
});

t.test('a blocked sender gets an accepted answer; the ticket is created as spam', async (t) => {
  const { owner, base, token, spam, tickets } = await setup();
  await mustCreate(owner.live, `${base}/blocked-sources`, { value: 'spammy.example' });
  const res = await post(token, { ...GOOD, email: 'bot@mail.spammy.example' });
  t.equal(res.status, 200);
  t.match(res.body, { success: true, ticket: { ticketNumber: Number } });
  t.match(await spam(), [{ title: 'My order never came', isSpam: true, source: 'web' }]);
  t.equal((await tickets()).length, 0, 'not among the live tickets');
});

t.test('allowed origins: another origin or none is 403; the Origin or the Referer of an allowed page is accepted', async (t) => {
  const { token, tickets } = await setup({ allowedOrigins: ['https://shop.example', 'https://www.shop.example:8443/'] });
  assertErrorShape(t, await post(token, GOOD, { headers: { origin: 'https://evil.example' } }), 403, 'origin_not_allowed');
  assertErrorShape(t, await post(token, GOOD), 403, 'origin_not_allowed');
  assertErrorShape(t, await post(token, GOOD, { headers: { referer: 'https://evil.example/shop.example' } }), 403, 'origin_not_allowed');
  assertErrorShape(t, await post(token, GOOD, { headers: { origin: 'null' } }), 403, 'origin_not_allowed');
  t.equal((await post(token, GOOD, { headers: { origin: 'https://shop.example' } })).status, 200);
  t.equal((await post(token, GOOD, { headers: { origin: 'https://WWW.shop.example:8443' } })).status, 200);
  t.equal((await post(token, GOOD, { headers: { referer: 'https://shop.example/contact?x=1' } })).status, 200);
  t.equal((await tickets()).length, 3);
});

t.test('bodies too large, of another type or malformed: 4xx, nothing created', async (t) => {
  const { token, tickets } = await setup();
  const huge = await post(token, { ...GOOD, message: 'x'.repeat(300_000) });
  assertErrorShape(t, huge, 413, 'payload_too_large');
  assertErrorShape(t, await post(token, urlencoded({ ...GOOD, message: 'x'.repeat(300_000) }), { headers: FORM_POST }), 413, 'payload_too_large');
  assertErrorShape(t, await post(token, 'email=a@example.com', { headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type');
  assertErrorShape(t, await post(token, '<xml/>', { headers: { 'content-type': 'application/xml' } }), 415, 'unsupported_media_type');
  assertErrorShape(t, await post(token, `--${BOUNDARY}\r\nContent-Disposition: form-data; name="email"\r\n\r\nbroken`, { headers: MULTIPART }), 400, 'invalid_multipart');
  const longFields = multipartBody({ ...GOOD, a: 'x'.repeat(100_000), b: 'x'.repeat(100_000), c: 'x'.repeat(100_000) });
  assertErrorShape(t, await post(token, longFields, { headers: MULTIPART }), 413, 'payload_too_large');
  const tooMany = multipartBody(
    GOOD,
    Array.from({ length: 6 }, (_, i) => ({ name: 'attachments', filename: `f${i}.txt`, type: 'text/plain', content: 'x' })),
  );
  const refused = await post(token, tooMany, { headers: MULTIPART });
  t.equal(refused.status, 413, 'more files than a form takes');
  t.equal(refused.body.statusCode, 413);
  t.equal((await tickets()).length, 0);
});

t.test('the field mapping: other field names fill the ticket, customFields too', async (t) => {
  const { token, tickets } = await setup({
    fieldMapping: { 'your-email': 'email', topic: 'subject', details: 'message', plan: 'customFields.plan', 'order[]': 'customFields.orders' },
  });
  const res = await post(token, urlencoded({ 'your-email': 'pat@example.com', topic: 'Upgrade', details: 'Please', plan: 'pro', ignored: 'x' }) + '&order[]=1&order[]=2', {
    headers: { ...FORM_POST, accept: 'application/json' },
  });
  t.equal(res.status, 200, JSON.stringify(res.body));
  const [ticket] = await tickets();
  t.match(ticket, { title: 'Upgrade', body: 'Please', customFields: { plan: 'pro', orders: ['1', '2'] } });
  t.notOk('ignored' in (ticket!.customFields as object), 'unmapped fields are dropped');
  const missing = await post(token, { email: 'pat@example.com', subject: 'x', message: 'y' });
  assertErrorShape(t, missing, 400, 'invalid_submission');
  t.same(missing.body.errors.map((e: { field: string }) => e.field).sort(), ['details', 'topic', 'your-email'], 'the errors name the fields the page has');
});

t.test('a test-mode form makes test-mode tickets', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.test);
  const form = await mustCreate(owner.test, `/v1/brands/${brand.id}/forms`, { name: 'Sandbox' });
  t.equal((await post(form.token, GOOD)).status, 200);
  t.equal((await owner.test('GET', `/v1/brands/${brand.id}/tickets`)).body.data.length, 1);
});

t.test('floods: 429 with Retry-After per address, then per form, and nothing is created beyond the budgets', async (t) => {
  const { token, tickets, formNow } = await setup();
  const flooder = newAddress();
  for (let i = 1; i <= 5; i++) {
    const res = await post(token, { ...GOOD, subject: `Flood ${i}` }, { ip: flooder });
    t.equal(res.status, 200, `submission ${i} of the address's 5`);
    t.ok(res.headers['x-ratelimit-limit'], 'X-RateLimit-Limit');
  }
  const refused = await post(token, { ...GOOD, subject: 'Flood 6' }, { ip: flooder });
  assertErrorShape(t, refused, 429, 'rate_limited');
  t.ok(Number(refused.headers['retry-after']) >= 1, 'Retry-After in seconds');
  t.equal(refused.headers['x-ratelimit-remaining'], '0');
  assertErrorShape(t, await post(`ft_${'B'.repeat(43)}`, GOOD, { ip: flooder }), 429, 'rate_limited');

  // The form's own budget (8 an hour) is spent from other addresses: 3 more, then every address is refused.
  for (let i = 0; i < 3; i++) t.equal((await post(token, { ...GOOD, subject: `Other ${i}` })).status, 200);
  const spent = await post(token, GOOD);
  assertErrorShape(t, spent, 429, 'rate_limited');
  t.match(spent.body.message, /this form/);
  t.equal((await tickets()).length, 8, 'eight tickets, not one more');
  t.equal((await formNow()).submissionCount, 8);

  const other = await setup();
  t.equal((await post(other.token, GOOD)).status, 200, "another form's budget is its own");
});

t.test('CORS: any page may post to a form, whatever corsOrigins says', async (t) => {
  const preflight = await app.inject({
    method: 'OPTIONS',
    url: `/v1/forms/ft_${'C'.repeat(43)}`,
    headers: { origin: 'https://shop.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
  });
  t.equal(preflight.statusCode, 204);
  t.equal(preflight.headers['access-control-allow-origin'], '*');
  const brands = await app.inject({ method: 'OPTIONS', url: '/v1/brands', headers: { origin: 'https://shop.example', 'access-control-request-method': 'GET' } });
  t.not(brands.headers['access-control-allow-origin'], '*', 'other routes keep the configured origins');
});
