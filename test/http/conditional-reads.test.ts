import t from 'tap';
import type { Test } from 'tap';
import { assertErrorShape, assertNotFound, client, makeTicket, servicesOf, testApp, type Reply } from '../helpers/app.js';
import { SIGN_IN_TEST_ENV, teamOf } from '../helpers/sign-in.js';

// Conditional reads: GET /v1/brands/{brandId}/tickets/{ticketId}, …/tickets/{ticketId}/comments,
// /v1/brands/{brandId}/tickets, /v1/tickets, /v1/tickets/stats, /v1/auth/mentions/unread and
// /v1/brands/{brandId}/email-connections (and their /v1/workspaces twins) answer with a weak ETag
// and Cache-Control: private, no-cache, and If-None-Match with 304: the dashboard's polls, revalidated
// by the browser's own cache.

const { app, db } = await testApp(t, SIGN_IN_TEST_ENV);
const services = servicesOf(db);
const org = await teamOf(app, services);
const other = await teamOf(app, services);
const base = `/v1/brands/${org.first.id}`;
const ticket = await makeTicket(org.owner.live, base, { title: 'Printer on fire', customerEmail: 'ann@example.com', customerName: 'Ann' });
await org.owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'First look' });
const mailbox = await org.owner.live('POST', `${base}/email-connections`, { provider: 'IMAP', email: 'support@acme.example', host: '93.184.215.14', password: 'app-password-1' });

type Call = ReturnType<typeof client>;
const WEAK_TAG = /^W\/"[A-Za-z0-9_-]{27}"$/;

/** The seven polled reads, as the member (assigned to the first brand) sees them. */
const reads = {
  ticket: `${base}/tickets/${ticket.id}`,
  comments: `${base}/tickets/${ticket.id}/comments`,
  brandList: `${base}/tickets?limit=20`,
  crossBrandList: '/v1/tickets?status=active&limit=100',
  stats: '/v1/tickets/stats',
  mentions: '/v1/auth/mentions/unread',
  mailboxes: `${base}/email-connections`,
};
type Read = keyof typeof reads;

async function tagsOf(call: Call): Promise<Record<Read, string>> {
  const tags = {} as Record<Read, string>;
  for (const [name, url] of Object.entries(reads) as [Read, string][]) {
    const res = await call('GET', url);
    if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
    tags[name] = String(res.headers.etag);
  }
  return tags;
}

/** After `change`, exactly the reads in `changed` have a new tag; each old tag then gets the new body, the others still 304. */
async function assertChanges(t: Test, call: Call, changed: Read[], change: () => Promise<Reply | void>): Promise<void> {
  const before = await tagsOf(call);
  const res = await change();
  if (res) t.ok(res.status < 300, `the change succeeded: ${res.status} ${JSON.stringify(res.body)}`);
  for (const [name, url] of Object.entries(reads) as [Read, string][]) {
    const again = await call('GET', url, undefined, { 'if-none-match': before[name] });
    if (changed.includes(name)) {
      t.equal(again.status, 200, `${name}: the old tag gets the new body`);
      t.not(again.headers.etag, before[name], `${name}: a new tag`);
    } else {
      t.equal(again.status, 304, `${name}: unchanged, still 304`);
    }
  }
}

t.test('each polled read: a weak ETag, private no-cache, and 304 for the tag the caller holds', async (t) => {
  const workspaceTwins = [reads.ticket, reads.comments, reads.brandList, reads.mailboxes].map((url) =>
    url.replace(`/v1/brands/${org.first.id}`, `/v1/workspaces/ws_${org.first.id.slice(3)}`),
  );
  for (const url of [...Object.values(reads), ...workspaceTwins]) {
    const first = await org.asMember('GET', url);
    t.equal(first.status, 200, url);
    t.match(first.headers.etag, WEAK_TAG, `${url}: a weak ETag`);
    t.equal(first.headers['cache-control'], 'private, no-cache', `${url}: kept by the caller's own cache only, revalidated before each use`);
    t.match(String(first.headers.vary), /Authorization, Cookie/, `${url}: varies by credential`);
    const tag = String(first.headers.etag);

    const again = await org.asMember('GET', url);
    t.equal(again.headers.etag, tag, `${url}: the same answer twice, the same tag`);
    const notModified = await org.asMember('GET', url, undefined, { 'if-none-match': tag });
    t.equal(notModified.status, 304, `${url}: 304`);
    t.equal(notModified.body, undefined, `${url}: no body`);
    t.equal(notModified.headers['content-type'], undefined, `${url}: no content type`);
    t.equal(notModified.headers.etag, tag, `${url}: the 304 repeats the tag`);
    t.equal(notModified.headers['cache-control'], 'private, no-cache');

    t.equal((await org.asMember('GET', url, undefined, { 'if-none-match': `W/"stale", ${tag}` })).status, 304, `${url}: a list naming the tag`);
    t.equal((await org.asMember('GET', url, undefined, { 'if-none-match': tag.slice(2) })).status, 304, `${url}: the strong form of the tag (weak comparison)`);
    t.equal((await org.asMember('GET', url, undefined, { 'if-none-match': '*' })).status, 304, `${url}: *`);
    const stale = await org.asMember('GET', url, undefined, { 'if-none-match': 'W/"stale"' });
    t.equal(stale.status, 200, `${url}: another tag gets the body`);
    t.same(stale.body, first.body);
  }
});

t.test('every change a reader would see changes the tags of the reads that show it, and only those', async (t) => {
  const comments = `${base}/tickets/${ticket.id}/comments`;
  await t.test('a new comment', (t) =>
    assertChanges(t, org.asMember, ['ticket', 'comments', 'brandList', 'crossBrandList'], () => org.owner.live('POST', comments, { body: 'Second look' })),
  );
  const made = (await org.asMember('GET', comments)).body as { id: string }[];
  await t.test('an edited comment', (t) =>
    assertChanges(t, org.asMember, ['comments'], () => org.owner.live('PATCH', `${comments}/${made[0]!.id}`, { body: 'First look, edited' })),
  );
  await t.test('a status change', (t) =>
    assertChanges(t, org.asMember, ['ticket', 'brandList', 'crossBrandList', 'stats'], () => org.owner.live('PATCH', `${base}/tickets/${ticket.id}`, { status: 'pending' })),
  );
  await t.test("the customer's new name, shown on the ticket and in the lists", async (t) => {
    const { customerId } = (await org.owner.live('GET', reads.ticket)).body as { customerId: string };
    await assertChanges(t, org.asMember, ['ticket', 'brandList', 'crossBrandList'], () => org.owner.live('PATCH', `${base}/contacts/${customerId}`, { name: 'Ann Other' }));
  });
  await t.test('a mention of the member, then its acknowledgement', async (t) => {
    await assertChanges(t, org.asMember, ['ticket', 'comments', 'brandList', 'crossBrandList', 'mentions'], () =>
      org.owner.live('POST', comments, { body: `@[Mo](${org.member.id}) look`, metadata: { isInternal: true } }),
    );
    await assertChanges(t, org.asMember, ['mentions'], () => org.asMember('POST', `/v1/auth/mentions/ack-ticket/${ticket.id}`));
  });
  await t.test('a renamed mailbox', (t) =>
    assertChanges(t, org.asMember, ['mailboxes'], () => org.owner.live('PATCH', `${base}/email-connections/${mailbox.body.id}`, { name: 'Desk' })),
  );
  await t.test('a new ticket in a brand the member does not see changes nothing they read', (t) =>
    assertChanges(t, org.asMember, [], () => org.owner.live('POST', `/v1/brands/${org.second.id}/tickets`, { title: 'Elsewhere' })),
  );
});

t.test('a permission change: the brand taken away answers 404 to the old tag, not 304; the cross-brand reads change', async (t) => {
  const held = await tagsOf(org.asMember);
  const manage = (brandIds: string[]) => org.asOwner('PUT', `/v1/auth/members/${org.member.id}/brands`, { allBrands: false, brandIds });
  t.equal((await manage([org.second.id])).status, 200);
  for (const name of ['ticket', 'comments', 'brandList', 'mailboxes'] as const) {
    assertNotFound(t, await org.asMember('GET', reads[name], undefined, { 'if-none-match': held[name] }), `${name} in a brand no longer assigned`);
  }
  for (const name of ['crossBrandList', 'stats'] as const) {
    const res = await org.asMember('GET', reads[name], undefined, { 'if-none-match': held[name] });
    t.equal(res.status, 200, `${name}: now counts the other brand's tickets`);
    t.not(res.headers.etag, held[name]);
  }
  t.equal((await manage([org.first.id])).status, 200);
  for (const name of ['ticket', 'comments', 'brandList', 'mailboxes'] as const) {
    t.equal((await org.asMember('GET', reads[name], undefined, { 'if-none-match': held[name] })).status, 304, `${name}: the same view again, the same tag`);
  }
});

t.test('no answer is shared between callers, and the tag never comes before the credential is checked', async (t) => {
  const asOwner = await org.asOwner('GET', reads.ticket);
  const asAdmin = await org.asAdmin('GET', reads.ticket);
  t.same(asOwner.body, asAdmin.body, 'the owner and the admin see the same ticket');
  t.not(asOwner.headers.etag, asAdmin.headers.etag, 'each under their own tag');
  const adminWithOwnersTag = await org.asAdmin('GET', reads.ticket, undefined, { 'if-none-match': String(asOwner.headers.etag) });
  t.equal(adminWithOwnersTag.status, 200, "the owner's tag does not validate the admin's copy");
  t.same(adminWithOwnersTag.body, asAdmin.body);
  const withKey = await org.owner.live('GET', reads.ticket, undefined, { 'if-none-match': String(asOwner.headers.etag) });
  t.equal(withKey.status, 200, "nor the API key's");

  const tag = String(asOwner.headers.etag);
  assertErrorShape(t, await client(app)('GET', reads.ticket, undefined, { 'if-none-match': tag }), 401, 'missing_credentials');
  assertErrorShape(t, await client(app, 'ts_forged')('GET', reads.ticket, undefined, { 'if-none-match': tag }), 401, 'invalid_session');
  assertNotFound(t, await other.asOwner('GET', reads.ticket, undefined, { 'if-none-match': tag }), "another organization's owner holding the tag");
  assertNotFound(t, await org.owner.test('GET', reads.ticket, undefined, { 'if-none-match': tag }), 'the test mode');
});

t.test('only the polled reads answer conditionally: writes, errors and other reads carry no ETag', async (t) => {
  const created = await org.owner.live('POST', `${base}/tickets`, { title: 'New' });
  t.equal(created.status, 201);
  t.equal(created.headers.etag, undefined, 'a 201');
  const missing = await org.owner.live('GET', `${base}/tickets/tkt_${'0'.repeat(26)}`, undefined, { 'if-none-match': '*' });
  t.equal(missing.status, 404, 'If-None-Match: * on a ticket that is not there is still 404');
  t.equal(missing.headers.etag, undefined, 'a 404');
  const brand = await org.owner.live('GET', base, undefined, { 'if-none-match': '*' });
  t.equal(brand.status, 200, 'a read that is not polled ignores If-None-Match');
  t.equal(brand.headers.etag, undefined);
  const invalid = await org.owner.live('GET', `${base}/tickets?limit=0`, undefined, { 'if-none-match': '*' });
  assertErrorShape(t, invalid, 400, 'validation_failed');
});

t.test('the OpenAPI document names the 304 on the conditional reads', async (t) => {
  const doc = (await client(app)('GET', '/v1/openapi.json')).body;
  t.match(doc.paths['/v1/brands/{brandId}/tickets/{ticketId}'].get.responses['304'].description, /Not Modified/);
  t.match(doc.paths['/v1/auth/mentions/unread'].get.responses['304'].description, /ETag/);
  t.notOk(doc.paths['/v1/brands/{brandId}'].get.responses['304'], 'not on other reads');
});
