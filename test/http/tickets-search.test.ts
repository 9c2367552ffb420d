import t from 'tap';
import { SEARCH_RANK_WINDOW } from '../../server/domains/tickets/service.js';
import { assertErrorShape, client, makeBrand, makeTicket, ownerWithBrand, signup, type Signup, testApp } from '../helpers/app.js';

// Every test signs up its own accounts: lift the per-hour signup limit for this file.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });

type Call = Signup['live'];

const setup = () => ownerWithBrand(app);

const q = encodeURIComponent;
const sorted = (ids: string[]) => [...ids].sort();

async function found(call: Call, base: string, search: string, extra = ''): Promise<string[]> {
  const res = await call('GET', `${base}/tickets?search=${q(search)}${extra}`);
  if (res.status !== 200) throw new Error(`search failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data.map((x: { id: string }) => x.id);
}

t.test('search matches title, body, customer email and customer name; case, accents and prefixes', async (t) => {
  const { owner, base } = await setup();
  const printer = await makeTicket(owner.live, base, { title: 'Printer on fire', body: 'The office printer started smoking' });
  const cv = await makeTicket(owner.live, base, { title: 'Question', body: 'I sent my Résumé twice, CAFÉ crème' });
  const plain = await makeTicket(owner.live, base, { title: 'resume upload fails', body: 'naive question about the cafe' });
  const byEmail = await makeTicket(owner.live, base, { title: 'Refund', customerEmail: 'ann.lee@acme-corp.com', customerName: 'Zoë Ångström' });
  const other = await makeTicket(owner.live, base, { title: 'Unrelated', body: 'nothing to see' });
  const S = (s: string) => found(owner.live, base, s).then(sorted);

  t.same(await S('printer'), [printer.id], 'title and body word');
  t.same(await S('SMOKING'), [printer.id], 'case-insensitive, body');
  t.same(await S('résumé'), sorted([cv.id, plain.id]), 'accented query finds plain and accented text');
  t.same(await S('resume'), sorted([cv.id, plain.id]), 'plain query finds accented text');
  t.same(await S('café'), sorted([cv.id, plain.id]));
  t.same(await S('naïve'), [plain.id]);
  t.same(await S('prin'), [printer.id], 'the last word is a prefix: search as you type');
  t.same(await S('printer smo'), [printer.id], 'every word must match');
  t.same(await S('printer resume'), [], 'words are AND-ed');
  t.same(await S('pri office'), [], 'only the last word is a prefix');
  t.same(await S('ann.lee@acme-corp.com'), [byEmail.id], 'the customer email, whole');
  t.same(await S('acme'), [byEmail.id], 'a part of the customer email');
  t.same(await S('ann.lee@ac'), [byEmail.id], 'an email being typed');
  t.same(await S('zoe angstrom'), [byEmail.id], 'the customer name, accents folded');
  t.same(await S('ZOË'), [byEmail.id]);
  t.same(await S('refund ann'), [byEmail.id], 'words may match in different fields');
  t.same(await S('unrelated'), [other.id]);
  t.same(await S('xylophone'), [], 'no match: empty page');

  // The customer's rename reaches the search (and the customer sort) at once.
  const contactId = (await owner.live('GET', `${base}/tickets/${byEmail.id}`)).body.customerId;
  t.equal((await owner.live('PATCH', `${base}/contacts/${contactId}`, { name: 'Bartholomew' })).status, 200);
  t.same(await S('bartholomew'), [byEmail.id], 'new name found');
  t.same(await S('angstrom'), [], 'old name gone');
  // Editing the ticket re-indexes it.
  t.equal((await owner.live('PATCH', `${base}/tickets/${other.id}`, { title: 'Keyboard sticky' })).status, 200);
  t.same(await S('keyboard'), [other.id]);
  t.same(await S('unrelated'), []);
  // A deleted ticket is not found.
  t.equal((await owner.live('DELETE', `${base}/tickets/${other.id}`)).status, 200);
  t.same(await S('keyboard'), []);
});

t.test('relevance order without sort; an explicit sort wins; filters combine', async (t) => {
  const { owner, base } = await setup();
  const inBody = await makeTicket(owner.live, base, { title: 'Question', body: 'my invoice is wrong', priority: 'high' });
  const inTitle = await makeTicket(owner.live, base, { title: 'Invoice wrong', body: 'see title', priority: 'low' });
  const twice = await makeTicket(owner.live, base, { title: 'Invoice invoice', body: 'invoice again', priority: 'urgent', status: 'pending' });
  t.same(await found(owner.live, base, 'invoice'), [twice.id, inTitle.id, inBody.id], 'more and better-placed matches first');
  t.same(await found(owner.live, base, 'invoice', '&order=asc'), [twice.id, inTitle.id, inBody.id], 'relevance is always best first');
  t.same(await found(owner.live, base, 'invoice', '&sort=createdAt&order=asc'), [inBody.id, inTitle.id, twice.id], 'explicit sort');
  t.same(await found(owner.live, base, 'invoice', '&sort=priority'), [twice.id, inBody.id, inTitle.id], 'explicit sort by priority');
  t.same(await found(owner.live, base, 'invoice', '&status=pending'), [twice.id], 'filters still apply');
  t.same(await found(owner.live, base, 'invoice', '&priority=low'), [inTitle.id]);
});

t.test('cursor walk over search results: the ranked window, then older matches by recency', async (t) => {
  const { owner, base, brand } = await setup();
  // More matches than the ranked window: rows made in SQL, indexed as a create indexes them.
  const total = SEARCH_RANK_WINDOW + 37;
  await db.raw(
    `
    insert into tickets (id, account_id, livemode, brand_id, ticket_number, title, body, status, search_vector)
    select id, ?, true, ?, i, title, body, 'open', ticketd_ticket_vector(title, '', body)
    from generate_series(1, ?) as i,
      lateral (select 'tkt_' || lpad(i::text, 26, '0') as id, 'Bulk ' || i as title, case when i % 7 = 0 then 'parcel parcel parcel' else 'a parcel' end as body) as r`,
    [owner.accountId, brand.id, total],
  );
  await db('brands')
    .where({ id: brand.id })
    .update({ nextTicketNumber: total + 1 });
  await makeTicket(owner.live, base, { title: 'No match here' });

  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res = await owner.live('GET', `${base}/tickets?search=parcel&limit=100${cursor ? `&cursor=${q(cursor)}` : ''}`);
    t.equal(res.status, 200);
    seen.push(...res.body.data.map((x: { id: string }) => x.id));
    cursor = res.body.pagination.nextCursor;
    if (pages === 0) {
      // A cursor belongs to its search.
      assertErrorShape(t, await owner.live('GET', `${base}/tickets?search=other&cursor=${q(cursor!)}`), 400, 'cursor_mismatch');
      assertErrorShape(t, await owner.live('GET', `${base}/tickets?search=parcel&sort=createdAt&cursor=${q(cursor!)}`), 400, 'cursor_mismatch');
      assertErrorShape(t, await owner.live('GET', `${base}/tickets?cursor=${q(cursor!)}`), 400, 'cursor_mismatch');
      // A new match between pages does not disturb the walk.
      await makeTicket(owner.live, base, { title: 'parcel late' });
    }
    pages++;
  } while (cursor);
  t.equal(new Set(seen).size, seen.length, 'none twice');
  const bulk = seen.filter((id) => id.startsWith('tkt_00000'));
  t.equal(bulk.length, total, 'every match once');
  t.ok(pages >= Math.ceil(total / 100), 'full pages');
  const n = (id: string) => Number(id.slice(4));
  const window = bulk.slice(0, SEARCH_RANK_WINDOW);
  const tail = bulk.slice(SEARCH_RANK_WINDOW);
  t.ok(
    window.every((id) => n(id) > 37),
    'the window holds the newest matches',
  );
  const strong = window.filter((id) => n(id) % 7 === 0).length;
  t.ok(strong > 10 && window.slice(0, strong).every((id) => n(id) % 7 === 0), 'stronger matches first within the window');
  t.same(tail, [...tail].sort().reverse(), 'older matches follow, newest first');
  t.equal(tail.length, 37);
});

t.test('hostile and odd input never fails; text with no letter or digit does not filter', async (t) => {
  const { owner, base } = await setup();
  const a = await makeTicket(owner.live, base, { title: 'Ärger mit 東京 Büro 🎉 party', body: "it's c++ & (maybe) a:b|c!" });
  const b = await makeTicket(owner.live, base, { title: 'Second' });
  const all = sorted([a.id, b.id]);
  for (const s of [
    "a & | ! ( ) : * '",
    "'",
    '\\',
    "o'brien",
    '!!!',
    '(',
    ':*',
    '&&&',
    '<->',
    'a<->b',
    "'a':* & !b",
    '🎉',
    '🎉🎉 ',
    '   ',
    '%_',
    'NULL',
    'x'.repeat(500),
    'é'.repeat(300),
    `${'ab '.repeat(166)}`,
    '\u0000',
    'a\u0000b',
  ]) {
    const res = await owner.live('GET', `${base}/tickets?search=${q(s)}`);
    t.ok(res.status < 500, `${JSON.stringify(s.slice(0, 20))}: ${res.status}`);
  }
  for (const raw of ['%ED%A0%80x', '%FF%FE', '%', '%zz', 'a%00b']) {
    const res = await owner.live('GET', `${base}/tickets?search=${raw}`);
    t.ok(res.status < 500, `raw ${raw}: ${res.status}`);
  }
  t.same(sorted(await found(owner.live, base, '!!!')), all, 'punctuation only: no filter');
  t.same(sorted(await found(owner.live, base, '🎉')), all, 'emoji only: no filter');
  t.same(sorted(await found(owner.live, base, '')), all, 'empty: no filter');
  t.same(await found(owner.live, base, '東京'), [a.id], 'CJK');
  t.same(await found(owner.live, base, 'arger buro'), [a.id], 'umlauts folded');
  t.same(await found(owner.live, base, 'c++ & (maybe)'), [a.id], 'operators are plain separators');
  t.same(await found(owner.live, base, "it's"), [a.id]);
  t.same(await found(owner.live, base, '🎉 party'), [a.id], 'emoji ignored, words kept');
  t.equal((await owner.live('GET', `${base}/tickets?search=${'x'.repeat(501)}`)).status, 400, 'over 500 characters: 400');
});

t.test('search stays in its brand, account and mode', async (t) => {
  const { owner, base } = await setup();
  const mine = await makeTicket(owner.live, base, { title: 'shared secret word zanzibar' });
  const otherBrand = await makeBrand(owner.live, 'Other');
  await makeTicket(owner.live, `/v1/brands/${otherBrand.id}`, { title: 'zanzibar elsewhere' });
  const stranger = await signup(app);
  const strangerBrand = await makeBrand(stranger.live);
  await makeTicket(stranger.live, `/v1/brands/${strangerBrand.id}`, { title: 'zanzibar too' });
  const testBrand = await makeBrand(owner.test);
  await makeTicket(owner.test, `/v1/brands/${testBrand.id}`, { title: 'zanzibar in test mode' });

  t.same(await found(owner.live, base, 'zanzibar'), [mine.id], 'only this brand');
  t.same(await found(owner.live, `/v1/workspaces/${base.split('/').pop()}`, 'zanz'), [mine.id], 'workspaces alias');
  t.equal((await stranger.live('GET', `${base}/tickets?search=zanzibar`)).status, 404, 'another account: 404');
  t.equal((await owner.test('GET', `${base}/tickets?search=zanzibar`)).status, 404, 'test key on a live brand: 404');
  t.equal((await client(app)('GET', `${base}/tickets?search=zanzibar`)).status, 401);
});
