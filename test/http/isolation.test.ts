import t from 'tap';
import { client, makeBrand, signup, testApp, type Reply } from '../helpers/app.js';

/**
 * Tenant isolation on every brand-scoped route, read from the OpenAPI document so that a new route
 * cannot be left out: another account, and the other mode of the same account, must see 404 for
 * the brand and for every id of it, and must change nothing. A write route needs a valid body in
 * BODIES (the test fails for a route that has none), so the request gets past validation and the
 * 404 comes from the scope check itself.
 */

const { app } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });

const owner = await signup(app);
const brand = await makeBrand(owner.live, 'Owner brand');
const base = `/v1/brands/${brand.id}`;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function must(res: Promise<Reply>, status = 201): Promise<any> {
  const r = await res;
  if (r.status !== status) throw new Error(`setup failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}
const member = (await must(owner.live('GET', '/v1/accounts/me/members'), 200)).data as { id: string }[];
const company = await must(owner.live('POST', `${base}/companies`, { name: 'Initech', domain: 'initech.example' }));
const contact = await must(owner.live('POST', `${base}/contacts`, { email: 'peter@initech.example', name: 'Peter' }));
const category = await must(owner.live('POST', `${base}/categories`, { name: 'Billing' }));
const tag = await must(owner.live('POST', `${base}/tags`, { name: 'vip' }));
const tag2 = await must(owner.live('POST', `${base}/tags`, { name: 'urgent-ish' }));
const status = await must(owner.live('POST', `${base}/statuses`, { key: 'waiting', name: 'Waiting', color: '#ff9900' }));
await must(owner.live('POST', `${base}/fields/ticket`, { key: 'plan', label: 'Plan', type: 'text' }));
const blocked = await must(owner.live('POST', `${base}/blocked-sources`, { value: 'spam@example.com' }));
const ticket = await must(owner.live('POST', `${base}/tickets`, { title: 'Owner ticket', customerEmail: 'peter@initech.example', tags: ['vip'] }));
const other = await must(owner.live('POST', `${base}/tickets`, { title: 'Second ticket' }));
const comment = await must(owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'Owner comment' }));
await must(owner.live('POST', `${base}/tickets/${ticket.id}/watchers`, { memberId: member[0]!.id }));
const BOUNDARY = 'ticketd-isolation';
const MULTIPART_HEADERS = { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` };
const MULTIPART_BODY = `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nabc\r\n--${BOUNDARY}--\r\n`;
const attachment = (await must(owner.live('POST', `${base}/tickets/${ticket.id}/attachments/upload`, MULTIPART_BODY, MULTIPART_HEADERS))).attachment;
// A public IP literal: accepted without DNS, and never called (no dispatcher runs here).
const webhook = await must(owner.live('POST', `${base}/webhooks`, { url: 'https://93.184.215.14/hook', events: ['ticket.created'] }));
await must(owner.live('POST', `${base}/tickets`, { title: 'Announced' }));
const delivery = (await must(owner.live('GET', `${base}/webhooks/${webhook.id}/deliveries`), 200))[0];

const ids: Record<string, string> = {
  ticketId: ticket.id,
  commentId: comment.id,
  statusId: status.id,
  categoryId: category.id,
  tagId: tag.id,
  targetId: tag.id,
  contactId: contact.id,
  companyId: company.id,
  sourceId: blocked.id,
  memberId: member[0]!.id,
  attachmentId: attachment.id,
  entityType: 'ticket',
  key: 'plan',
  webhookId: webhook.id,
  deliveryId: delivery.id,
};

/** A valid body for every write route, by "METHOD suffix" (the suffix after /v1/brands/{brandId}). */
const BODIES: Record<string, unknown> = {
  'PATCH ': { name: 'Renamed' },
  'DELETE ': undefined,
  'POST /statuses': { key: 'other', name: 'Other', color: '#ff9900' },
  'POST /statuses/reorder': { statusIds: [status.id] },
  'PATCH /statuses/{statusId}': { name: 'Renamed' },
  'PUT /schema': { type: 'object' },
  'POST /fields/{entityType}': { key: 'tier', label: 'Tier', type: 'text' },
  'POST /fields/{entityType}/reorder': { keys: ['plan'] },
  'PATCH /fields/{entityType}/{key}': { label: 'Renamed' },
  'POST /categories': { name: 'Other' },
  'POST /categories/reorder': { categoryIds: [category.id] },
  'PATCH /categories/{categoryId}': { name: 'Renamed' },
  'POST /tags': { name: 'other' },
  'POST /tags/merge': { targetTagId: tag.id, sourceTagIds: [tag2.id] },
  'PATCH /tags/{tagId}': { name: 'renamed' },
  'POST /tags/{targetId}/merge': { sourceTagIds: [tag2.id] },
  'POST /contacts': { email: 'new@example.com' },
  'PATCH /contacts/{contactId}': { name: 'Renamed' },
  'POST /customers': { email: 'new@example.com' },
  'PATCH /customers/{contactId}': { name: 'Renamed' },
  'POST /companies': { name: 'Other' },
  'PATCH /companies/{companyId}': { name: 'Renamed' },
  'POST /blocked-sources': { value: 'other@example.com' },
  'POST /tickets': { title: 'New' },
  'PATCH /tickets/{ticketId}': { title: 'Renamed' },
  'POST /tickets/{ticketId}/comments': { body: 'Hello' },
  'PATCH /tickets/{ticketId}/comments/{commentId}': { body: 'Renamed' },
  'PATCH /comments/{commentId}': { body: 'Renamed' },
  'POST /tickets/{ticketId}/spam': { isSpam: true },
  'POST /tickets/{ticketId}/merge': { sourceTicketIds: [other.id] },
  'POST /tickets/bulk': { action: 'close', ticketIds: [ticket.id] },
  'POST /tickets/{ticketId}/watchers': { memberId: member[0]!.id },
  'PATCH /tickets/{ticketId}/watchers/{memberId}': { notifyOnComment: false },
  'POST /tickets/{ticketId}/attachments': { filename: 'a.txt', contentType: 'text/plain', size: 3 },
  'POST /tickets/{ticketId}/attachments/{attachmentId}/confirm': undefined,
  'POST /tickets/{ticketId}/attachments/upload': MULTIPART_BODY,
  'POST /attachments/pending': { filename: 'a.txt', contentType: 'text/plain', size: 3 },
  'POST /attachments/pending/{attachmentId}/confirm': undefined,
  'POST /attachments/pending/upload': MULTIPART_BODY,
  'POST /attachments/urls': { ids: [attachment.id] },
  'POST /webhooks': { url: 'https://93.184.215.14/other', events: ['ticket.updated'] },
  'PATCH /webhooks/{webhookId}': { enabled: false },
  'POST /webhooks/{webhookId}/rotate-secret': { graceMinutes: 5 },
  'POST /webhooks/{webhookId}/deliveries/{deliveryId}/redeliver': undefined,
};
/** Required query strings. */
const QUERIES: Record<string, string> = { 'GET /contacts/search': '?q=pe', 'GET /customers/search': '?q=pe' };

const doc = (await client(app)('GET', '/v1/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
const routes = Object.entries(doc.paths)
  .filter(([p]) => p.startsWith('/v1/brands/{brandId}'))
  .flatMap(([p, ops]) => Object.keys(ops).map((m) => ({ method: m.toUpperCase(), suffix: p.slice('/v1/brands/{brandId}'.length) })));

const fill = (suffix: string) =>
  suffix.replace(/\{(\w+)\}/g, (_, name: string) => {
    if (!(name in ids)) throw new Error(`isolation test: no id for {${name}} in ${suffix}; add one`);
    return ids[name]!;
  });

const stranger = await signup(app);
const strangerBrand = await makeBrand(stranger.live, 'Stranger brand');
const ownTestBrand = await makeBrand(owner.test, 'Owner test brand');

t.test('every brand-scoped route is covered', async (t) => {
  t.ok(routes.length > 60, `${routes.length} routes`);
  for (const r of routes) {
    if (r.method === 'GET' || r.method === 'DELETE') continue;
    t.ok(`${r.method} ${r.suffix}` in BODIES, `${r.method} ${r.suffix} has a body in BODIES`);
  }
});

for (const r of routes) {
  const name = `${r.method} ${r.suffix}`;
  t.test(`${name}: another account and the other mode get 404`, async (t) => {
    const body = BODIES[name];
    const headers = body === MULTIPART_BODY ? MULTIPART_HEADERS : {};
    const url = (prefix: string) => `${prefix}${fill(r.suffix)}${QUERIES[name] ?? ''}`;
    const attempts: [string, Reply][] = [
      ['another account, on this brand', await stranger.live(r.method, url(base), body, headers)],
      ['this account in test mode, on the live brand', await owner.test(r.method, url(base), body, headers)],
      ['the workspaces path too', await stranger.live(r.method, url(`/v1/workspaces/ws_${brand.id.slice(3)}`), body, headers)],
      ['test mode on the workspaces path', await owner.test(r.method, url(`/v1/workspaces/ws_${brand.id.slice(3)}`), body, headers)],
    ];
    // With its own brand in the path, a stranger still cannot reach this brand's ids.
    const hasIds = /\{(?!entityType)\w+\}/.test(r.suffix);
    if (hasIds) {
      attempts.push(['another account, own brand, these ids', await stranger.live(r.method, url(`/v1/brands/${strangerBrand.id}`), body, headers)]);
      attempts.push(['this account in test mode, own test brand, live ids', await owner.test(r.method, url(`/v1/brands/${ownTestBrand.id}`), body, headers)]);
    }
    for (const [label, res] of attempts) {
      t.equal(res.status, 404, res.status === 404 ? `${label}: 404` : `${label}: 404, got ${res.status} ${JSON.stringify(res.body)}`);
      t.equal(res.body?.code, 'not_found', label);
    }
  });
}

t.test('routes that take ids in the body act on nothing of another account', async (t) => {
  const res = await stranger.live('POST', `/v1/brands/${strangerBrand.id}/tickets/bulk`, { action: 'delete', ticketIds: [ticket.id, other.id] });
  t.equal(res.status, 200);
  t.match(res.body, { success: 0, failed: 2 });
  const urls = await stranger.live('POST', `/v1/brands/${strangerBrand.id}/attachments/urls`, { ids: [attachment.id] });
  t.equal(urls.status, 200);
  t.same(urls.body, { [attachment.id]: null }, "no download URL for another account's attachment");
});

t.test("after all of that, the owner's data is untouched", async (t) => {
  const got = await owner.live('GET', `${base}/tickets/${ticket.id}`);
  t.match(got.body, { title: 'Owner ticket', status: 'open', isSpam: false, deletedAt: null, mergedIntoId: null, commentCount: 1 });
  t.equal((await owner.live('GET', `${base}/tickets/${other.id}`)).body.mergedIntoId, null);
  t.equal((await owner.live('GET', `${base}/comments/${comment.id}`)).body.body, 'Owner comment');
  t.equal((await owner.live('GET', `${base}/categories/${category.id}`)).body.name, 'Billing');
  t.equal((await owner.live('GET', `${base}/tags/${tag2.id}`)).status, 200, 'the tag was not merged away');
  t.equal((await owner.live('GET', `${base}/contacts/${contact.id}`)).body.name, 'Peter');
  t.equal((await owner.live('GET', `${base}/companies/${company.id}`)).body.name, 'Initech');
  t.equal((await owner.live('GET', `${base}/statuses/${status.id}`)).body.name, 'Waiting');
  t.equal((await owner.live('GET', `${base}/tickets/${ticket.id}/watchers`)).body.length, 1);
  t.equal((await owner.live('GET', `${base}/blocked-sources`)).body.length, 1);
  t.equal((await owner.live('GET', `${base}/fields/ticket`)).body[0].label, 'Plan');
  t.equal((await owner.live('GET', base)).body.name, 'Owner brand');
  t.equal((await owner.live('GET', `${base}/tickets/${ticket.id}/attachments`)).body.length, 1);
});
