import t from 'tap';
import { emailPrefixOf, SEARCH_RANK_WINDOW } from '../../server/domains/tickets/service.js';
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

t.test('what looks like an email: one token with an @ after something, or a local part with . _ or +', async (t) => {
  for (const [text, prefix] of [
    ['ann.lee1', 'ann.lee1'],
    ['Ann.Lee1', 'ann.lee1'],
    ['ann.', 'ann.'],
    ['john_doe', 'john_doe'],
    ['jane+billing', 'jane+billing'],
    ['mary-jo.smith', 'mary-jo.smith'],
    ['zoë.müller', 'zoë.müller'],
    ['ann.lee1@', 'ann.lee1@'],
    ['ann.lee1@company2.ex', 'ann.lee1@company2.ex'],
    ["o'brien@x", "o'brien@x"],
    ['a%b@', 'a%b@'],
    ['ann', null],
    ['follow-up', null],
    ['ann lee1', null],
    ['ann.lee1 refund', null],
    ['@acme.com', null],
    ['a@b@c', null],
    ['.ann', null],
    ['ann..lee', null],
    ['c++', null],
    [`${'x'.repeat(249)}.abcd`, `${'x'.repeat(249)}.abcd`],
    [`${'x'.repeat(250)}.abcd`, null],
  ] as const) {
    t.equal(emailPrefixOf(text), prefix, JSON.stringify(text.slice(0, 30)));
  }
});

t.test('an email or its start also finds the customer through the contacts, OR-ed with the words', async (t) => {
  const { owner, base } = await setup();
  const lee12 = await makeTicket(owner.live, base, { title: 'Refund', customerEmail: 'ann.lee12@acme.example', customerName: 'Ann Lee' });
  const lee1 = await makeTicket(owner.live, base, { title: 'Login', customerEmail: 'Ann.Lee1@beta.example' });
  await makeTicket(owner.live, base, { title: 'Other Ann', customerEmail: 'ann.leeds@gamma.example' });
  const mention = await makeTicket(owner.live, base, { title: 'Forwarded', body: 'first written to ann.lee1 yesterday', customerEmail: 'john.doe@delta.example' });
  const longer = await makeTicket(owner.live, base, { title: 'Typo', body: 'ann lee100 wrote', customerEmail: 'bob@delta.example' });
  const S = (s: string, extra = '') => found(owner.live, base, s, extra).then(sorted);

  t.same(await S('ann.lee1'), sorted([lee12.id, lee1.id, mention.id]), 'customers whose email starts so, and the words whole');
  t.same(await S('ANN.LEE1'), sorted([lee12.id, lee1.id, mention.id]), 'any case');
  t.same(await S('ann.lee1', '&sort=createdAt'), sorted([lee12.id, lee1.id, mention.id]), 'with a sort, the same matches');
  t.same(await S('ann.lee12@acme.ex'), [lee12.id], 'an email being typed: its start');
  t.same(await S('ann.lee12@acme.example'), [lee12.id], 'the whole email');
  t.same(await S('ann.lee1@'), sorted([lee1.id, mention.id]), 'up to the @');
  t.same(await S('lee1'), sorted([lee12.id, lee1.id, mention.id, longer.id]), 'other text as before: the last word a prefix');
  t.same(await S('ann lee1'), sorted([lee12.id, lee1.id, mention.id, longer.id]), 'two words: as before');
  t.same(await S('ann.lee1', '&status=pending'), [], 'filters still apply');

  // Relevance: the tickets with both words whole rank above those of the email's start alone.
  const ids = (res: { body: { data: { id: string }[] } }) => res.body.data.map((x) => x.id);
  const first = await owner.live('GET', `${base}/tickets?search=ann.lee1&limit=2`);
  t.equal(first.status, 200);
  t.same(sorted(ids(first)), sorted([lee1.id, mention.id]), 'the words first');
  const next = await owner.live('GET', `${base}/tickets?search=ann.lee1&limit=2&cursor=${q(first.body.pagination.nextCursor)}`);
  t.same(ids(next), [lee12.id], 'then the email alone, on the next page');
  t.equal(next.body.pagination.hasMore, false);

  // LIKE's wildcards in an email are matched literally.
  const underscore = await makeTicket(owner.live, base, { title: 'U', customerEmail: 'q_r@under.example' });
  await makeTicket(owner.live, base, { title: 'X', customerEmail: 'qxr@under.example' });
  const percent = await makeTicket(owner.live, base, { title: 'P', customerEmail: 'q%r@under.example' });
  await makeTicket(owner.live, base, { title: 'Z', customerEmail: 'qzzr@under.example' });
  t.same(await S('q_r@'), sorted([underscore.id, percent.id]), '_ is no wildcard (q%r@ matches the words q and r)');
  t.same(await S('q%r@under'), sorted([underscore.id, percent.id]), '% is no wildcard');
  t.same(await S('q%r@under.example'), sorted([underscore.id, percent.id]));
});

t.test('an email search stays in its brand, account and mode, on the brand list and across brands', async (t) => {
  const { owner, base, brand } = await setup();
  const mine = await makeTicket(owner.live, base, { title: 'Mine', customerEmail: 'ann.lee1@acme.example' });
  const otherBrand = await makeBrand(owner.live, 'Other');
  const sibling = await makeTicket(owner.live, `/v1/brands/${otherBrand.id}`, { title: 'Sibling', customerEmail: 'ann.lee1@acme.example' });
  const stranger = await signup(app);
  const strangerBrand = await makeBrand(stranger.live);
  const theirs = await makeTicket(stranger.live, `/v1/brands/${strangerBrand.id}`, { title: 'Theirs', customerEmail: 'ann.lee1@acme.example' });
  const testBrand = await makeBrand(owner.test);
  const inTest = await makeTicket(owner.test, `/v1/brands/${testBrand.id}`, { title: 'Test mode', customerEmail: 'ann.lee1@acme.example' });

  // `…@acme.ex`: found by the email's start alone (`ex` is no whole word of it).
  const typed = 'ann.lee1@acme.ex';
  t.same(await found(owner.live, base, 'ann.lee1'), [mine.id], 'only this brand');
  t.same(await found(owner.live, base, typed), [mine.id], 'only this brand, by the email alone');
  t.same(await found(owner.live, `/v1/workspaces/${brand.id}`, typed), [mine.id], 'workspaces alias');
  t.same(await found(stranger.live, `/v1/brands/${strangerBrand.id}`, typed), [theirs.id], 'the other account sees its own');
  t.same(await found(owner.test, `/v1/brands/${testBrand.id}`, typed), [inTest.id], 'test mode sees its own');
  t.equal((await stranger.live('GET', `${base}/tickets?search=${q(typed)}`)).status, 404, 'another account: 404');

  const across = async (extra: string) => {
    const res = await owner.live('GET', `/v1/tickets?search=${q(typed)}${extra}`);
    t.equal(res.status, 200);
    return sorted(res.body.data.map((x: { id: string }) => x.id));
  };
  t.same(await across(''), sorted([mine.id, sibling.id]), 'across brands: both brands, no other account or mode');
  t.same(await across('&sort=createdAt'), sorted([mine.id, sibling.id]), 'across brands with a sort');
  t.same(await across(`&brandIds=${otherBrand.id}`), [sibling.id], 'the brands named');
});

t.test('odd email-like input never fails', async (t) => {
  const { owner, base } = await setup();
  const a = await makeTicket(owner.live, base, { title: 'Odd', customerEmail: 'zoë.müller@exämple.com' });
  for (const s of [
    '@',
    'a@',
    '@a',
    'a@@b',
    'a%@%',
    '%@%',
    'a_@_',
    '_',
    '%',
    '\\',
    'a\\b@c',
    "a'b@c",
    'a.b\u0000c',
    `${'x.'.repeat(127)}`,
    `${'x'.repeat(254)}@`,
    `${'é.'.repeat(150)}`,
    '東京.大阪',
    '🎉.x',
    'x.🎉',
    'ǅ.ǆ@İ',
  ]) {
    const res = await owner.live('GET', `${base}/tickets?search=${q(s)}`);
    t.equal(res.status, 200, `${JSON.stringify(s.slice(0, 20))}: ${res.status}`);
    const across = await owner.live('GET', `/v1/tickets?search=${q(s)}`);
    t.equal(across.status, 200, `across brands ${JSON.stringify(s.slice(0, 20))}: ${across.status}`);
  }
  t.same(await found(owner.live, base, 'ZOË.MÜLLER@exä'), [a.id], 'a non-ASCII email by its start, any case');
  t.same(await found(owner.live, base, 'zoe.muller'), [a.id], 'and by its words, accents folded');
});
