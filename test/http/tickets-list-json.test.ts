import t, { type Test } from 'tap';
import { client, makeBrand, servicesOf, signup, testApp, type Signup } from '../helpers/app.js';
import { sessionToken } from '../helpers/sign-in.js';

// The list pages are JSON text built by PostgreSQL (decision 0103); a ticket's own read is its
// view serialized by the route's schema. Every ticket of a page must read as its own GET does,
// field for field and in the same order, whoever asks and whichever way the page is read.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });

type Call = Signup['live'];
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;

/** Text a serializer must escape, and text it need not (a line separator, an emoji). */
const AWKWARD = 'Quote " back\\slash \u0001 tab\t new\nline \u2028 é 🎫 </script>';

async function world() {
  const email = `owner-${Math.random().toString(36).slice(2)}@example.com`;
  const owner = await signup(app, email);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}`;
  const company = (await owner.live('POST', `${base}/companies`, { name: 'Acme', domain: 'acme.com' })).body;
  const category = (await owner.live('POST', `${base}/categories`, { name: 'Billing' })).body;
  const tags = await Promise.all(['zeta', 'Alpha', 'beta'].map(async (name) => (await owner.live('POST', `${base}/tags`, { name })).body));
  const full = await owner.live('POST', `${base}/tickets`, {
    title: `Full ${AWKWARD}`,
    body: `Body ${AWKWARD}`,
    customerEmail: 'ann@acme.com',
    customerName: `Ann ${AWKWARD}`,
    status: 'closed',
    closeReason: 'duplicate',
    priority: 'urgent',
    assigneeId: owner.ownerId,
    createdBy: 'agent-7',
    categoryId: category.id,
    tags: tags.map((g: Any) => g.id),
    links: [{ url: 'https://example.com/1', title: 'One', type: 'github' }, { url: 'https://example.com/2' }, { url: 'https://example.com/3', title: null }],
    customFields: { orderId: 'A-1', nested: [1, 1.5, -2, 1e21, 9007199254740991, 0.1, null, { deep: [true, false, AWKWARD] }], ключ: 'значение', empty: {} },
    metadata: { plan: 'gold', count: 3, text: AWKWARD },
    source: 'email',
    sourceId: 'msg-1',
    sourceData: { inbox: 'support', list: [1, 'two'] },
    dueAt: '2027-02-28T23:59:59.999Z',
  });
  t.equal(full.status, 201, 'the full ticket made');
  const bare = (await owner.live('POST', `${base}/tickets`, { title: 'Bare' })).body;
  const scalar = (await owner.live('POST', `${base}/tickets`, { title: 'Scalar fields', customFields: 'just text' })).body;
  const customer = full.body.customer;
  t.equal(customer.companyId, company.id, 'the customer is in a company');
  t.equal((await owner.live('PATCH', `${base}/contacts/${customer.id}`, { avatarUrl: 'https://example.com/ann.png' })).status, 200);
  // Microseconds that a Date cannot hold (read back cut to .789), and a merge pointer, set as a
  // merge would leave them; none of the lists hides such a ticket.
  await db('tickets')
    .where({ id: bare.id })
    .update({ mergedIntoId: full.body.id, createdAt: db.raw(`'2026-03-01 12:34:56.789999+00'`), updatedAt: db.raw(`'2026-03-01 23:59:59.000001+00'`) });
  const session = client(app, await sessionToken(app, servicesOf(db), owner.accountId, email));
  return { owner, session, brand, base, ids: [full.body.id, bare.id, scalar.id] };
}

/** Each ticket of the page against its own GET: the same fields with the same values, in the same order. */
async function sameAsOwnRead(t: Test, call: Call, base: string, page: Any[], expected: string[], brand?: Any) {
  t.same(page.map((x) => x.id).sort(), [...expected].sort(), 'the page holds the tickets');
  for (const item of page) {
    const own = await call('GET', `${base}/tickets/${item.id}`);
    t.equal(own.status, 200);
    const { brand: itsBrand, ...ticket } = item;
    t.strictSame(ticket, own.body, `${item.title.slice(0, 12)}: every field as its own read gives it`);
    t.same(Object.keys(ticket), Object.keys(own.body), 'in the same order');
    if (brand) {
      t.strictSame(itsBrand, { id: brand.id, name: brand.name, slug: brand.slug, ticketPrefix: brand.ticketPrefix ?? null, iconUrl: brand.iconUrl ?? null }, 'its brand');
      t.equal(Object.keys(item).at(-1), 'brand', 'the brand last');
    } else t.notOk('brand' in item, 'no brand on the brand list');
  }
}

t.test("a brand's list: each ticket as its own read gives it, to an API key and to a session, on every kind of page", async (t) => {
  const { owner, session, base, ids } = await world();
  const closedOnly = ids.slice(0, 1);
  for (const [who, call] of [
    ['API key', owner.live],
    ['session', session],
  ] as const) {
    for (const [query, expected] of [
      ['', ids], // the prepared page
      ['?sort=title&order=asc', ids],
      ['?status=closed', closedOnly], // a filtered page, read through objection
      ['?search=Full', closedOnly], // a relevance-ordered search
      ['?search=Full&sort=updatedAt', closedOnly],
    ] as const) {
      const res = await call('GET', `${base}/tickets${query || '?status=all'}`);
      t.equal(res.status, 200, `${who} ${query}`);
      t.equal(res.headers['content-type'], 'application/json; charset=utf-8');
      await sameAsOwnRead(t, call, base, res.body.data, expected);
    }
  }
  const first = await owner.live('GET', `${base}/tickets?status=all&limit=2&sort=ticketNumber&order=asc`);
  t.strictSame(Object.keys(first.body), ['data', 'pagination']);
  t.strictSame(Object.keys(first.body.pagination), ['cursor', 'nextCursor', 'hasMore']);
  t.equal(first.body.pagination.hasMore, true);
  const next = await owner.live('GET', `${base}/tickets?status=all&limit=2&sort=ticketNumber&order=asc&cursor=${encodeURIComponent(first.body.pagination.cursor)}`);
  t.same(
    next.body.data.map((x: Any) => x.id),
    [ids[2]],
    'the cursor continues after the page',
  );
  t.strictSame(next.body.pagination, { cursor: null, nextCursor: null, hasMore: false });
  const none = await owner.live('GET', `${base}/tickets?status=pending`);
  t.strictSame(none.body, { data: [], pagination: { cursor: null, nextCursor: null, hasMore: false } }, 'an empty page');
});

t.test('the cross-brand list: each ticket as its own read gives it, with its brand last, on each way the list is read', async (t) => {
  const { owner, session, brand, base, ids } = await world();
  const other = await makeBrand(owner.live);
  const read = (await owner.live('GET', `/v1/brands/${brand.id}`)).body;
  for (const [who, call] of [
    ['API key', owner.live],
    ['session', session],
  ] as const) {
    for (const query of [
      'status=all', // one range of the account's index
      `status=all&brandIds=${brand.id},${other.id}`, // a part per brand
      'status=all&search=Full', // search, by relevance
      'status=all&search=Full&sort=createdAt', // search, sorted
    ]) {
      const res = await call('GET', `/v1/tickets?${query}`);
      t.equal(res.status, 200, `${who} ${query}`);
      await sameAsOwnRead(t, call, base, res.body.data, query.includes('search') ? ids.slice(0, 1) : ids, read);
    }
  }
});
