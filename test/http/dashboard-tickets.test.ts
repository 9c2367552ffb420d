import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import * as members from '../../server/domains/members/service.js';
import { assertErrorShape, client, makeBrand, makeTicket, mustCreate, servicesOf, signup, testApp, type Signup } from '../helpers/app.js';
import { sessionToken } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

// GET /v1/tickets (cross-brand list), /v1/tickets/stats, /trends and /team-metrics.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });

type Call = Signup['live'];
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;

const DAY = 86_400_000;
const today = Math.floor(testNow() / DAY) * DAY;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

async function addMember(accountId: string, name: string, email: string): Promise<string> {
  const id = `mem_${Math.random().toString(36).slice(2).padEnd(12, '0')}`;
  await db('members').insert({ id, accountId, email, name, role: 'member' });
  return id;
}

/** Every page of a list, following nextCursor; the pages' tickets in order. */
async function walk(call: Call, url: string): Promise<Any[]> {
  const out: Any[] = [];
  let cursor: string | null = null;
  const sep = url.includes('?') ? '&' : '?';
  for (let pages = 0; pages < 100; pages++) {
    const res = await call('GET', cursor ? `${url}${sep}cursor=${encodeURIComponent(cursor)}` : url);
    if (res.status !== 200) throw new Error(`list failed: ${url} ${res.status} ${JSON.stringify(res.body)}`);
    out.push(...res.body.data);
    if (res.body.pagination.hasMore !== (res.body.pagination.nextCursor !== null)) throw new Error('hasMore disagrees with nextCursor');
    cursor = res.body.pagination.nextCursor;
    if (!cursor) return out;
  }
  throw new Error('too many pages');
}

// One account, three live brands, a test-mode brand, another account's brand.
const owner = await signup(app);
const brands = [await makeBrand(owner.live, 'Alpha'), await makeBrand(owner.live, 'Beta'), await makeBrand(owner.live, 'Gamma')];
const [A, B, C] = brands.map((b) => b.id) as [string, string, string];
const ann = await addMember(owner.accountId, 'ann', 'ann@example.com');
const bob = await addMember(owner.accountId, 'bob', 'bob@example.com');
const words = ['kiwi', 'apple', 'mango', 'banana', 'cherry', 'date', 'fig', 'grape', 'lemon', 'lime', 'melon', 'olive', 'peach', 'pear', 'plum'];
const priorities = [null, 'low', 'normal', 'medium', 'high', 'urgent'];
const statuses = ['open', 'pending', 'resolved', 'closed'];
const sources = ['api', 'email', 'web'];
const made: Any[] = [];
const extra: Record<string, { companyId?: string; categoryId?: string }> = {};
for (const [bi, brandId] of [A, B, C].entries()) {
  const base = `/v1/brands/${brandId}`;
  const company = await mustCreate(owner.live, `${base}/companies`, { name: ['zeta', 'acme', 'mid'][bi] });
  await mustCreate(owner.live, `${base}/contacts`, { email: `c${bi}@example.com`, name: ['carol', 'dave', 'erin'][bi], companyId: company.id });
  const category = await mustCreate(owner.live, `${base}/categories`, { name: ['billing', 'tech', 'sales'][bi] });
  extra[brandId] = { companyId: company.id, categoryId: category.id };
  for (let i = 0; i < 7; i++) {
    const n = made.length;
    const tk = await makeTicket(owner.live, base, {
      title: words[n % words.length]!,
      body: n % 5 === 0 ? 'needle in the body' : 'plain',
      priority: priorities[n % priorities.length],
      assigneeId: n % 3 === 0 ? null : n % 3 === 1 ? ann : bob,
      categoryId: n % 2 === 0 ? category.id : null,
      source: sources[n % sources.length],
      ...(n % 4 === 0 ? {} : { customerEmail: n % 4 === 1 ? `c${bi}@example.com` : `solo${n}@example.com`, customerName: `zed${n}` }),
      ...(n % 3 === 2 ? { dueAt: new Date(today + (n % 5) * DAY).toISOString() } : {}),
    });
    if (n % 4 !== 0) await owner.live('PATCH', `${base}/tickets/${tk.id}`, { status: statuses[n % statuses.length] });
    made.push(tk);
  }
}
// Creation and resolution days we know: ticket n made (n % 5) days ago; done ones resolved (n % 3) days ago.
for (const [n, tk] of made.entries()) {
  const created = new Date(today - (n % 5) * DAY + 3_600_000 + n * 1000);
  await db('tickets')
    .where({ id: tk.id })
    .update({ createdAt: created, updatedAt: new Date(today - (n % 7) * DAY + 7_200_000) });
  await db('tickets')
    .where({ id: tk.id })
    .whereNotNull('resolvedAt')
    .update({ resolvedAt: new Date(today - (n % 3) * DAY + 5 * 3_600_000) });
}
// Rows moved by hand are counted afresh, as after a load.
await db.raw('select ticketd_rebuild_ticket_counts()');
// One spam and one deleted ticket: never counted, never listed by default.
const spam = await makeTicket(owner.live, `/v1/brands/${A}`, { title: 'spammy' });
await owner.live('PATCH', `/v1/brands/${A}/tickets/${spam.id}`, { isSpam: true });
const gone = await makeTicket(owner.live, `/v1/brands/${B}`, { title: 'gone' });
await owner.live('DELETE', `/v1/brands/${B}/tickets/${gone.id}`);

/** Every live, non-spam ticket as the brand lists show it. */
async function allTickets(): Promise<Any[]> {
  const out: Any[] = [];
  for (const b of [A, B, C]) out.push(...(await walk(owner.live, `/v1/brands/${b}/tickets?limit=100&status=all`)));
  return out;
}
const everything = await allTickets();
const memberName: Record<string, string> = { [ann]: 'ann', [bob]: 'bob', [owner.ownerId]: 'test owner' };
const micro = (iso: string | null) => (iso === null ? Number.MAX_SAFE_INTEGER : Date.parse(iso));
const RANK: Record<string, number> = { low: 1, normal: 2, medium: 3, high: 4, urgent: 5 };
const KEY: Record<string, (x: Any) => string | number> = {
  createdAt: (x) => x.id,
  updatedAt: (x) => Date.parse(x.updatedAt),
  priority: (x) => RANK[x.priority] ?? 0,
  ticketNumber: (x) => x.ticketNumber,
  title: (x) => x.title.toLowerCase(),
  status: (x) => x.status,
  customer: (x) => (x.customer ? (x.customer.name || x.customer.email).toLowerCase() : ''),
  company: (x) => (x.customer?.company ? x.customer.company.name.toLowerCase() : ''),
  assignee: (x) => (x.assigneeId ? memberName[x.assigneeId]! : ''),
  category: (x) => (x.category ? x.category.name.toLowerCase() : ''),
  dueAt: (x) => micro(x.dueAt),
};
const cmp = (a: string | number, b: string | number) => (a < b ? -1 : a > b ? 1 : 0);
const expectOrder = (rows: Any[], sort: string, order: 'asc' | 'desc') => {
  const key = KEY[sort]!;
  const sign = order === 'asc' ? 1 : -1;
  return [...rows].sort((x, y) => sign * (cmp(key(x), key(y)) || cmp(x.id, y.id))).map((x) => x.id);
};

t.test('the dataset is what the tests assume', async (t) => {
  t.equal(everything.length, 21, '21 live non-spam tickets in three brands');
  t.ok(
    everything.every((x) => x.updatedAt.endsWith('00.000Z')),
    'updatedAt values are whole hours, so milliseconds order them as PostgreSQL does',
  );
});

// Every brand, named by none (one range of the account-wide index), or named all (a range per brand, merged).
const EVERY_BRAND_READS = { 'every brand': '', 'every brand named': `&brandIds=${A},${B},${C}` };

t.test('every sort, both orders, pages of 4 across brands: the order sorted in JS, no ticket twice or missed', async (t) => {
  for (const [read, named] of Object.entries(EVERY_BRAND_READS)) {
    for (const sort of Object.keys(KEY)) {
      for (const order of ['asc', 'desc'] as const) {
        const got = await walk(owner.live, `/v1/tickets?status=all&limit=4&sort=${sort}&order=${order}${named}`);
        t.same(
          got.map((x) => x.id),
          expectOrder(everything, sort, order),
          `${read}: ${sort} ${order}`,
        );
      }
    }
  }
  const dflt = await walk(owner.live, '/v1/tickets?status=all&limit=5');
  t.same(
    dflt.map((x) => x.id),
    expectOrder(everything, 'createdAt', 'desc'),
    'default: newest first',
  );
});

t.test('many brands, one holding most tickets or all even: every page in order, none twice or missed', async (t) => {
  // Brands named, a page reads a few rows per brand first and reads again when a brand may hold more
  // of it: the busy brand (30 of the newest tickets) forces the second read, the even ones do not.
  const other = await signup(app);
  const many = [];
  for (let i = 0; i < 6; i++) many.push(await makeBrand(other.live, `Many ${i}`));
  const made: Any[] = [];
  for (const [i, brand] of many.entries()) {
    for (let k = 0; k < 3; k++) made.push(await makeTicket(other.live, `/v1/brands/${brand.id}`, { title: words[(i * 3 + k) % words.length]! }));
  }
  for (let k = 0; k < 30; k++) made.push(await makeTicket(other.live, `/v1/brands/${many[0]!.id}`, { title: words[k % words.length]! }));
  const named = `&brandIds=${many.map((b) => b.id).join(',')}`;
  for (const [read, brandIds] of Object.entries({ 'every brand': '', 'every brand named': named })) {
    for (const sort of ['createdAt', 'title'] as const) {
      for (const order of ['asc', 'desc'] as const) {
        const got = await walk(other.live, `/v1/tickets?limit=10&sort=${sort}&order=${order}${brandIds}`);
        t.same(
          got.map((x) => x.id),
          expectOrder(made, sort, order),
          `${read}: ${sort} ${order}`,
        );
      }
    }
  }
});

t.test('each ticket carries its brand', async (t) => {
  const res = await owner.live('GET', '/v1/tickets?status=all&limit=100');
  t.equal(res.status, 200);
  const brandRows = await db('brands').whereIn('id', [A, B, C]);
  for (const x of res.body.data) {
    const b = brandRows.find((r: Any) => r.id === x.brandId);
    t.same(x.brand, { id: b.id, name: b.name, slug: b.slug, ticketPrefix: b.ticketPrefix ?? null, iconUrl: b.iconUrl ?? null });
  }
  t.same(new Set(res.body.data.map((x: Any) => x.brand.name)), new Set(['Alpha', 'Beta', 'Gamma']));
});

t.test('filters act across brands like the brand list', async (t) => {
  const ids = (rows: Any[]) => rows.map((x) => x.id).sort();
  const across = async (q: string) => ids(await walk(owner.live, `/v1/tickets?limit=3&${q}`));
  const perBrand = async (q: string) => {
    const out: Any[] = [];
    for (const b of [A, B, C]) out.push(...(await walk(owner.live, `/v1/brands/${b}/tickets?limit=100&${q}`)));
    return ids(out);
  };
  for (const q of [
    'status=active',
    'status=resolved,closed',
    'priority=high',
    'priority=all&status=all',
    `assigneeId=${ann}`,
    'assigneeId=null&status=all',
    'assigneeId=unassigned&status=all',
    'categoryId=null&status=all',
    'customerEmail=c1@example.com&status=all',
    'hasAttachments=false&status=all',
    `createdAfter=${new Date(today - 2 * DAY).toISOString()}&status=all`,
    `createdBefore=${new Date(today - 2 * DAY).toISOString()}&status=all`,
    'createdBy=nobody&status=all',
    'isSpam=true',
    'search=needle&status=all',
    'search=needle&status=all&sort=title&order=asc',
  ]) {
    const expected = await perBrand(q);
    for (const [read, named] of Object.entries(EVERY_BRAND_READS)) t.same(await across(`${q}${named}`), expected, `${read}: ${q}`);
  }
  const expected = ids(everything.filter((x) => x.source === 'email'));
  t.ok(expected.length > 0);
  t.same(await across('status=all&source=email'), expected, 'source');
  t.same(await across(`status=all&companyId=${extra[B]!.companyId}`), ids(everything.filter((x) => x.customer?.companyId === extra[B]!.companyId)), 'companyId');
  t.same(await across(`status=all&brandIds=${A},${C}`), ids(everything.filter((x) => x.brandId !== B)), 'brandIds');
  t.same(await across(`status=all&workspaceIds=${B}`), ids(everything.filter((x) => x.brandId === B)), 'workspaceIds (deprecated alias)');
  t.same(await across(`status=all&brandIds=${A.replace(/^br_/, 'ws_')}`), ids(everything.filter((x) => x.brandId === A)), 'a ws_ id names the brand too');
  t.same(await across('isSpam=true'), [spam.id], 'spam only on request');
  const search = await walk(owner.live, '/v1/tickets?search=needle&status=all&limit=2');
  t.same(ids(search), ids(everything.filter((x) => x.body === 'needle in the body')), 'search by relevance pages across brands');
});

t.test('a cursor continues only its own list', async (t) => {
  const first = await owner.live('GET', '/v1/tickets?status=all&limit=2');
  const cursor = encodeURIComponent(first.body.pagination.nextCursor);
  assertErrorShape(t, await owner.live('GET', `/v1/tickets?status=all&limit=2&brandIds=${A}&cursor=${cursor}`), 400, 'cursor_mismatch');
  assertErrorShape(t, await owner.live('GET', `/v1/tickets?status=all&limit=2&source=api&cursor=${cursor}`), 400, 'cursor_mismatch');
  assertErrorShape(t, await owner.live('GET', `/v1/tickets?status=all&limit=2&cursor=x${cursor}`), 400, 'invalid_cursor');
  t.equal((await owner.live('GET', `/v1/tickets?status=all&limit=2&cursor=${cursor}`)).status, 200);
});

t.test('a key limited to brands sees only them; a brand outside its scope, another account or mode is a 404', async (t) => {
  const key = await owner.live('POST', '/v1/accounts/me/api-keys', { name: 'limited', allBrands: false, brandIds: [A] });
  t.equal(key.status, 201);
  const limited = client(app, key.body.key);
  const rows = await walk(limited, '/v1/tickets?status=all&limit=100');
  t.ok(rows.length > 0);
  t.ok(
    rows.every((x) => x.brandId === A),
    'only brand A',
  );
  for (const url of [
    `/v1/tickets?brandIds=${B}`,
    `/v1/tickets?brandIds=${A},${B}`,
    `/v1/tickets/stats?brandIds=${B}`,
    `/v1/tickets/trends?brandIds=${C}`,
    `/v1/tickets/team-metrics?workspaceIds=${B}`,
  ]) {
    assertErrorShape(t, await limited('GET', url), 404, 'not_found');
  }
  const stats = (await limited('GET', '/v1/tickets/stats')).body;
  t.same(Object.keys(stats.byBrand), [A]);
  t.equal(stats.total, rows.length);

  const other = await signup(app);
  const theirs = await makeBrand(other.live, 'Theirs');
  await makeTicket(other.live, `/v1/brands/${theirs.id}`, { title: 'not yours' });
  for (const url of ['/v1/tickets', '/v1/tickets/stats', '/v1/tickets/trends', '/v1/tickets/team-metrics']) {
    assertErrorShape(t, await owner.live('GET', `${url}?brandIds=${theirs.id}`), 404, 'not_found');
  }
  const mine = await walk(owner.live, '/v1/tickets?status=all&limit=100');
  t.notOk(
    mine.some((x) => x.brandId === theirs.id),
    "another account's tickets never show",
  );

  const testBrand = await makeBrand(owner.test, 'Test brand');
  const testTicket = await makeTicket(owner.test, `/v1/brands/${testBrand.id}`, { title: 'test mode' });
  t.same(
    (await walk(owner.test, '/v1/tickets?status=all')).map((x) => x.id),
    [testTicket.id],
    'test mode sees only its own',
  );
  t.equal((await owner.test('GET', '/v1/tickets/stats')).body.total, 1);
  assertErrorShape(t, await owner.live('GET', `/v1/tickets?brandIds=${testBrand.id}`), 404, 'not_found');
  assertErrorShape(t, await owner.test('GET', `/v1/tickets?brandIds=${A}`), 404, 'not_found');
  t.notOk(
    (await walk(owner.live, '/v1/tickets?status=all&limit=100')).some((x) => x.id === testTicket.id),
    'live never sees test mode',
  );
});

t.test('bad input is a 400 in the error shape', async (t) => {
  for (const url of [
    '/v1/tickets?sort=bogus',
    '/v1/tickets?limit=0',
    '/v1/tickets?limit=101',
    '/v1/tickets?source=fax',
    '/v1/tickets?order=up',
    '/v1/tickets?createdAfter=yesterday',
    '/v1/tickets?unknown=1',
    `/v1/tickets?brandIds=${Array.from({ length: 101 }, (_, i) => `br_${i}`).join(',')}`,
    '/v1/tickets?brandIds=,',
    '/v1/tickets/stats?days=0',
    '/v1/tickets/stats?days=367',
    '/v1/tickets/trends?days=x',
    `/v1/tickets/trends?days=3&startDate=${dayOf(today)}`,
    `/v1/tickets/trends?startDate=${dayOf(today)}&endDate=${dayOf(today - DAY)}`,
    `/v1/tickets/trends?startDate=${dayOf(today - 400 * DAY)}&endDate=${dayOf(today)}`,
    '/v1/tickets/team-metrics?startDate=2026-13-45',
    '/v1/tickets/team-metrics?endDate=soon',
  ]) {
    const res = await owner.live('GET', url);
    t.equal(res.status, 400, url);
    t.type(res.body.message, 'string');
    t.equal(res.body.statusCode, 400);
  }
});

const live = everything; // live, non-spam
const count = (f: (x: Any) => boolean) => live.filter(f).length;

t.test('stats: counts by status and brand, exact', async (t) => {
  const res = await owner.live('GET', '/v1/tickets/stats');
  t.equal(res.status, 200);
  const s = res.body;
  t.equal(s.total, 21);
  for (const st of statuses)
    t.equal(
      s[st],
      count((x) => x.status === st),
      st,
    );
  t.same(s.byStatus, Object.fromEntries(statuses.filter((st) => count((x) => x.status === st)).map((st) => [st, count((x) => x.status === st)])));
  for (const b of [A, B, C]) {
    t.match(s.byBrand[b], {
      total: count((x) => x.brandId === b),
      open: count((x) => x.brandId === b && x.status === 'open'),
      pending: count((x) => x.brandId === b && x.status === 'pending'),
    });
  }
  t.equal(s.byBrand[A].name, 'Alpha');
  const done = live.filter((x) => x.status === 'resolved' || x.status === 'closed');
  t.equal(s.responseMetrics.ticketsResolved, done.length);
  const rows = await db('tickets')
    .whereIn(
      'id',
      done.map((x) => x.id),
    )
    .select('createdAt', 'resolvedAt');
  const avg = rows.reduce((a: number, r: Any) => a + (r.resolvedAt.getTime() - r.createdAt.getTime()), 0) / rows.length / 60_000;
  t.equal(s.responseMetrics.avgResolutionMinutes, Math.round(avg));
  t.equal(s.responseMetrics.avgFirstResponseMinutes, null);

  const recent = (await owner.live('GET', '/v1/tickets/stats?days=2')).body;
  t.equal(
    recent.total,
    count((x) => Date.parse(x.createdAt) >= today - DAY),
    'days=2: created today or yesterday',
  );
  const one = (await owner.live('GET', `/v1/tickets/stats?brandIds=${B}`)).body;
  t.same(Object.keys(one.byBrand), [B]);
  t.equal(
    one.total,
    count((x) => x.brandId === B),
  );
});

t.test('trends: created and resolved per day, zero-filled', async (t) => {
  const res = await owner.live('GET', '/v1/tickets/trends?days=10');
  t.equal(res.status, 200);
  t.same(res.body.period, { start: dayOf(today - 9 * DAY), end: dayOf(today) });
  t.equal(res.body.data.length, 10);
  const resolvedAt = new Map(
    (
      await db('tickets')
        .whereIn(
          'id',
          live.map((x) => x.id),
        )
        .whereNotNull('resolvedAt')
        .select('id', 'resolvedAt')
    ).map((r: Any) => [r.id, r.resolvedAt.getTime()]),
  );
  for (const [i, point] of res.body.data.entries()) {
    const day = today - (9 - i) * DAY;
    t.equal(point.date, dayOf(day));
    t.equal(
      point.created,
      count((x) => Math.floor(Date.parse(x.createdAt) / DAY) * DAY === day),
      `created ${point.date}`,
    );
    t.equal(point.resolved, [...resolvedAt.values()].filter((ms) => Math.floor(ms / DAY) * DAY === day).length, `resolved ${point.date}`);
  }
  t.ok(
    res.body.data.slice(0, 5).every((p: Any) => p.created === 0 && p.resolved === 0),
    'days without tickets are there with zeros',
  );
  const range = (await owner.live('GET', `/v1/tickets/trends?startDate=${dayOf(today - 2 * DAY)}&endDate=${new Date(today - DAY + 5000).toISOString()}&brandIds=${A}`)).body;
  t.same(
    range.data.map((p: Any) => p.date),
    [dayOf(today - 2 * DAY), dayOf(today - DAY)],
  );
  t.equal(
    range.data[1].created,
    count((x) => x.brandId === A && Math.floor(Date.parse(x.createdAt) / DAY) * DAY === today - DAY),
  );
  t.equal((await owner.live('GET', '/v1/tickets/trends')).body.data.length, 30, 'default: 30 days');
});

t.test('team metrics: resolved and closed per member over the period, CSAT not collected', async (t) => {
  const res = await owner.live('GET', '/v1/tickets/team-metrics');
  t.equal(res.status, 200);
  const rows = await db('tickets')
    .whereIn(
      'id',
      live.map((x) => x.id),
    )
    .whereNotNull('resolvedAt')
    .select('assigneeId', 'status');
  const by = (m: string, st: string) => rows.filter((r: Any) => r.assigneeId === m && r.status === st).length;
  const members = res.body.members;
  t.same(members.map((m: Any) => m.memberId).sort(), [ann, bob, owner.ownerId].sort(), 'every active member');
  for (const m of [ann, bob]) {
    const got = members.find((x: Any) => x.memberId === m);
    t.match(got, { memberName: memberName[m], ticketsResolved: by(m, 'resolved'), ticketsClosed: by(m, 'closed'), csatCount: 0, csatPositive: 0, csatScore: null });
  }
  t.ok(by(ann, 'resolved') + by(ann, 'closed') + by(bob, 'resolved') + by(bob, 'closed') > 0, 'the dataset has resolutions');
  const none = (await owner.live('GET', `/v1/tickets/team-metrics?startDate=${dayOf(today - 40 * DAY)}&endDate=${dayOf(today - 30 * DAY)}`)).body;
  t.ok(
    none.members.every((m: Any) => m.ticketsResolved === 0 && m.ticketsClosed === 0),
    'nothing resolved then',
  );
  const todayOnly = (await owner.live('GET', `/v1/tickets/team-metrics?startDate=${dayOf(today)}&endDate=${dayOf(today)}&brandIds=${C}`)).body;
  const doneToday = (
    await db('tickets')
      .whereIn(
        'id',
        live.filter((x) => x.brandId === C).map((x) => x.id),
      )
      .where('resolvedAt', '>=', new Date(today))
      .select('assigneeId')
  ).filter((r: Any) => r.assigneeId).length;
  t.equal(
    todayOnly.members.reduce((a: number, m: Any) => a + m.ticketsResolved + m.ticketsClosed, 0),
    doneToday,
  );
});

t.test('resolved_at follows the status: set on resolve, kept on close, cleared on reopen', async (t) => {
  const base = `/v1/brands/${A}`;
  const tk = await makeTicket(owner.live, base, { title: 'lifecycle' });
  const at = async () => (await db('tickets').where({ id: tk.id }).first('resolvedAt')).resolvedAt as Date | null;
  t.equal(await at(), null);
  await owner.live('PATCH', `${base}/tickets/${tk.id}`, { status: 'resolved' });
  const first = await at();
  t.ok(first);
  await owner.live('PATCH', `${base}/tickets/${tk.id}`, { status: 'closed' });
  t.same(await at(), first, 'still the time it became done');
  await owner.live('PATCH', `${base}/tickets/${tk.id}`, { status: 'open' });
  t.equal(await at(), null);
  await owner.live('DELETE', `${base}/tickets/${tk.id}`);
});

t.test('the OpenAPI document describes the four routes, their parameters and the brand on each ticket', async (t) => {
  const doc = (await client(app)('GET', '/v1/openapi.json')).body;
  for (const p of ['/v1/tickets', '/v1/tickets/stats', '/v1/tickets/trends', '/v1/tickets/team-metrics']) {
    const op = doc.paths[p]?.get;
    t.ok(op, `${p} is documented`);
    t.same(op.security, [{ apiKey: [] }, { session: [] }, { sessionCookie: [] }], "an API key or a member's session");
    t.ok(
      op.parameters.some((x: Any) => x.name === 'brandIds' && x.in === 'query'),
      `${p} takes brandIds`,
    );
  }
  const names = doc.paths['/v1/tickets'].get.parameters.map((x: Any) => x.name);
  for (const n of ['status', 'priority', 'assigneeId', 'search', 'sort', 'order', 'limit', 'cursor', 'workspaceIds', 'source', 'tagIds']) t.ok(names.includes(n), n);
  const item = doc.paths['/v1/tickets'].get.responses['200'].content['application/json'].schema.properties.data.items;
  t.same(Object.keys(item.properties.brand.properties).sort(), ['iconUrl', 'id', 'name', 'slug', 'ticketPrefix']);
});

// Last: the member it adds would count in the team metrics above.
t.test('a member signed in, assigned to one brand, sees only its tickets without naming any brand', async (t) => {
  const services = servicesOf(db);
  const member = await members.add(tenantCtx(systemCtx(services), owner.accountId, true), { email: 'one-brand@example.com', role: 'member', brandIds: [B] });
  const asMember = client(app, await sessionToken(app, services, owner.accountId, member.email));
  const rows = await walk(asMember, '/v1/tickets?status=all&limit=100');
  t.same(
    rows.map((x) => x.id).sort(),
    everything
      .filter((x) => x.brandId === B)
      .map((x) => x.id)
      .sort(),
    "every ticket of the member's brand",
  );
  t.ok(
    rows.every((x) => x.brandId === B),
    'and none of the other brands',
  );
  const stats = (await asMember('GET', '/v1/tickets/stats')).body;
  t.same(Object.keys(stats.byBrand), [B], 'stats count the assigned brand only');
  t.equal(stats.total, rows.length);
  const trends = (await asMember('GET', '/v1/tickets/trends?days=30')).body;
  t.equal(
    trends.data.reduce((n: number, d: Any) => n + d.created, 0),
    rows.length,
    'trends count the assigned brand only',
  );
  assertErrorShape(t, await asMember('GET', `/v1/tickets?brandIds=${A}`), 404, 'not_found');
});
