import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { Webhook } from 'standardwebhooks';
import { emptyDir, makeBrand, makeTicket, ownerWithBrand, signup, type Signup, testApp } from '../helpers/app.js';
import { addressOf, SIGN_IN_TEST_ENV } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

// Tickets are listed and searched by the names of the rows they point at (customer, company,
// assignee, category), and ticket create validates customFields by the brand's field rules. No
// trigger keeps them: each service that renames a row or changes a definition does, in its own
// transaction. Here every such path changes a row and the tickets (list, search, view) or ticket
// create show the new value at once.

const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const configFile = path.join(emptyDir, `renames-${process.pid}.json`);
writeFileSync(configFile, JSON.stringify({ identityProviders: { clerk: { secret: SECRET } } }));
const { app, db } = await testApp(t, { ...SIGN_IN_TEST_ENV, TICKETD_CONFIG: configFile, TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });

type Call = Signup['live'];
const q = encodeURIComponent;

async function ids(call: Call, url: string): Promise<string[]> {
  const res = await call('GET', url);
  if (res.status !== 200) throw new Error(`list failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data.map((x: { id: string }) => x.id);
}
const sortedBy = (call: Call, base: string, sort: string) => ids(call, `${base}/tickets?sort=${sort}&order=asc`);
const searched = async (call: Call, base: string, text: string) => (await ids(call, `${base}/tickets?search=${q(text)}`)).sort();

const setup = () => ownerWithBrand(app);

async function column(column: string, ticketIds: string[]): Promise<string[]> {
  const rows = (await db('tickets').whereIn('id', ticketIds).select('id', column)) as Record<string, string>[];
  const camel = column.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  return ticketIds.map((id) => rows.find((r) => r.id === id)![camel]);
}
const companySorts = (...ticketIds: string[]) => column('company_sort', ticketIds);
const customerSorts = (...ticketIds: string[]) => column('customer_sort', ticketIds);
const assigneeSorts = (...ticketIds: string[]) => column('assignee_sort', ticketIds);
const categorySorts = (...ticketIds: string[]) => column('category_sort', ticketIds);

async function ok(call: Call, method: string, url: string, body?: unknown) {
  const res = await call(method, url, body);
  if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

t.test('no trigger is left on contacts, companies, members, categories or field definitions', async (t) => {
  // members_notify_sessions sends a NOTIFY and renames nothing: it is not among these.
  const { rows } = await db.raw(`select c.relname || '.' || g.tgname as name from pg_trigger g join pg_class c on c.oid = g.tgrelid
    where c.relname in ('contacts', 'companies', 'members', 'categories', 'field_definitions') and not g.tgisinternal
      and g.tgname <> 'members_notify_sessions'`);
  t.same(rows, []);
  const { rows: functions } = await db.raw(`select proname from pg_proc where proname in
    ('tickets_follow_contact', 'tickets_follow_company', 'tickets_follow_member', 'tickets_follow_category', 'field_definitions_refresh_brand', 'brand_field_rules')`);
  t.same(functions, [], 'their functions are gone too');
});

t.test('a contact renamed, readdressed or moved to another company: the list, search and view of its tickets', async (t) => {
  const { owner, base } = await setup();
  await ok(owner.live, 'POST', `${base}/companies`, { name: 'Mango', domain: 'mango.com' });
  const other = await ok(owner.live, 'POST', `${base}/companies`, { name: 'Kiwi' });
  const bea = await makeTicket(owner.live, base, { title: 'One', customerEmail: 'bea@mango.com', customerName: 'Bea' });
  const bea2 = await makeTicket(owner.live, base, { title: 'Two', customerEmail: 'bea@mango.com' });
  const cal = await makeTicket(owner.live, base, { title: 'Three', customerEmail: 'cal@else.org', customerName: 'Cal' });
  const gone = await makeTicket(owner.live, base, { title: 'Four', customerEmail: 'bea@mango.com' });
  await ok(owner.live, 'DELETE', `${base}/tickets/${gone.id}`);
  const before = await sortedBy(owner.live, base, 'customer');
  t.same([before.slice(0, 2).sort(), before[2]], [[bea.id, bea2.id].sort(), cal.id], 'Bea, Bea, Cal');
  const contactId = bea.customerId ?? (await ok(owner.live, 'GET', `${base}/tickets/${bea.id}`)).customerId;

  // Renamed: sorts after Cal, found by the new name only, shown by the view.
  await ok(owner.live, 'PATCH', `${base}/contacts/${contactId}`, { name: 'Zora' });
  t.same((await sortedBy(owner.live, base, 'customer'))[0], cal.id, 'Zora sorts after Cal');
  t.same(await searched(owner.live, base, 'zora'), [bea.id, bea2.id].sort(), 'the new name is found');
  t.same(await searched(owner.live, base, 'bea mango'), [bea.id, bea2.id].sort(), 'the email still');
  t.same((await searched(owner.live, base, 'one bea')).length, 1);
  t.equal((await ok(owner.live, 'GET', `${base}/tickets/${bea.id}`)).customer.name, 'Zora');

  // Readdressed and without a name: sorts and is searched by the new address.
  await ok(owner.live, 'PATCH', `${base}/contacts/${contactId}`, { name: null, email: 'abe@else.org' });
  t.same((await sortedBy(owner.live, base, 'customer')).slice(0, 2).sort(), [bea.id, bea2.id].sort(), 'abe@else.org sorts before Cal');
  t.same(await searched(owner.live, base, 'abe'), [bea.id, bea2.id].sort());
  t.same(await searched(owner.live, base, 'zora'), [], 'the old name is not found');
  t.same(await searched(owner.live, base, 'mango'), [], 'nor the old address');

  // Moved to another company, then to none.
  t.same(await companySorts(bea.id, bea2.id, cal.id), ['mango', 'mango', '']);
  await ok(owner.live, 'PATCH', `${base}/contacts/${contactId}`, { companyId: other.id });
  t.same(await companySorts(bea.id, bea2.id, cal.id), ['kiwi', 'kiwi', '']);
  t.equal((await ok(owner.live, 'GET', `${base}/tickets/${bea.id}`)).customer.company.name, 'Kiwi');
  await ok(owner.live, 'PATCH', `${base}/companies/${other.id}`, { name: 'Apricot' });
  t.same(await companySorts(bea.id, bea2.id, cal.id), ['apricot', 'apricot', '']);
  t.same((await ids(owner.live, `${base}/tickets?sort=company&order=desc`)).slice(0, 2).sort(), [bea.id, bea2.id].sort(), 'a company first when descending');
  await ok(owner.live, 'PATCH', `${base}/contacts/${contactId}`, { companyId: null });
  t.same(await companySorts(bea.id, bea2.id, cal.id), ['', '', ''], 'no company left on any ticket');

  // The deleted ticket keeps what it had: it is never listed again.
  t.same(await customerSorts(gone.id), ['bea']);
});

t.test('a company renamed, created or given a domain that links contacts, and deleted: its contacts’ tickets', async (t) => {
  const { owner, base } = await setup();
  const pear = await makeTicket(owner.live, base, { title: 'P', customerEmail: 'pia@pear.com' });
  const fig = await makeTicket(owner.live, base, { title: 'F', customerEmail: 'fay@fig.com' });
  const plum = await makeTicket(owner.live, base, { title: 'Q', customerEmail: 'quinn@plum.com' });
  t.same(await companySorts(pear.id, fig.id, plum.id), ['', '', '']);

  // Created with a domain: the contacts of that domain join it, and their tickets show it.
  const pearCo = await ok(owner.live, 'POST', `${base}/companies`, { name: 'Pear Inc', domain: 'pear.com' });
  t.equal((await ok(owner.live, 'GET', `${base}/tickets/${pear.id}`)).customer.company.name, 'Pear Inc');
  const figCo = await ok(owner.live, 'POST', `${base}/companies`, { name: 'Fig' });
  // Given a domain later: the same.
  await ok(owner.live, 'PATCH', `${base}/companies/${figCo.id}`, { domain: 'fig.com' });
  t.same(await companySorts(pear.id, fig.id, plum.id), ['pear inc', 'fig', '']);
  t.same((await sortedBy(owner.live, base, 'company')).slice(1), [fig.id, pear.id], 'Fig, Pear Inc after the ticket without one');

  // Renamed: the order follows.
  await ok(owner.live, 'PATCH', `${base}/companies/${pearCo.id}`, { name: 'Apple Pear' });
  t.same((await sortedBy(owner.live, base, 'company')).slice(1), [pear.id, fig.id], 'Apple Pear before Fig');
  t.equal((await ok(owner.live, 'GET', `${base}/tickets/${pear.id}`)).customer.company.name, 'Apple Pear');
  // Deleted: its contacts have no company, nor their tickets.
  await ok(owner.live, 'DELETE', `${base}/companies/${pearCo.id}`);
  t.same(await companySorts(pear.id, fig.id, plum.id), ['', 'fig', '']);
  t.equal((await ok(owner.live, 'GET', `${base}/tickets/${pear.id}`)).customer.company, null);
  t.same(await sortedBy(owner.live, base, 'company').then((x) => x[2]), fig.id, 'Fig last');
});

t.test('a category renamed: its tickets sort by the new name; another brand’s is untouched', async (t) => {
  const { owner, base } = await setup();
  const elsewhere = `/v1/brands/${(await makeBrand(owner.live, 'Elsewhere')).id}`;
  const a = await ok(owner.live, 'POST', `${base}/categories`, { name: 'Alpha' });
  const b = await ok(owner.live, 'POST', `${base}/categories`, { name: 'Beta' });
  const c = await ok(owner.live, 'POST', `${elsewhere}/categories`, { name: 'Alpha' });
  const inA = await makeTicket(owner.live, base, { title: 'a', categoryId: a.id });
  const inB = await makeTicket(owner.live, base, { title: 'b', categoryId: b.id });
  const inC = await makeTicket(owner.live, elsewhere, { title: 'c', categoryId: c.id });
  t.same(await sortedBy(owner.live, base, 'category'), [inA.id, inB.id]);
  await ok(owner.live, 'PATCH', `${base}/categories/${a.id}`, { name: 'Zulu' });
  t.same(await sortedBy(owner.live, base, 'category'), [inB.id, inA.id], 'Beta, Zulu');
  await ok(owner.live, 'PATCH', `${base}/categories/${a.id}`, { color: '#112233' });
  t.same(await categorySorts(inA.id, inB.id, inC.id), ['zulu', 'beta', 'alpha'], 'a change of colour keeps it; the other brand keeps its own');
});

// The identity provider's notifications rename members (the only path that changes a member's
// name or address); members are account-wide, so their tickets in every brand and mode follow.
let messages = 0;
async function notifyUser(userId: string, email: string, first: string, last: string | null) {
  const id = `msg_${++messages}_${process.pid}`;
  const at = new Date(testNow());
  const text = JSON.stringify({
    type: 'user.updated',
    data: { id: userId, first_name: first, last_name: last, primary_email_address_id: 'idn_1', email_addresses: [{ id: 'idn_1', email_address: email }] },
  });
  const res = await app.inject({
    method: 'POST',
    url: '/v1/webhooks/clerk',
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(SECRET).sign(id, at, text),
    },
    payload: text,
  });
  if (res.statusCode !== 200) throw new Error(`notification failed: ${res.statusCode} ${res.body}`);
}

t.test('a member renamed by the identity provider: their tickets in every brand and both modes', async (t) => {
  const email = addressOf('assignee');
  const owner = await signup(app, email);
  const live = `/v1/brands/${(await makeBrand(owner.live)).id}`;
  const live2 = `/v1/brands/${(await makeBrand(owner.live, 'Second')).id}`;
  const test = `/v1/brands/${(await makeBrand(owner.test)).id}`;
  const mid = `mem_${randomBytes(6).toString('hex')}`;
  await db('members').insert({ id: mid, accountId: owner.accountId, email: addressOf('mid'), name: 'Mid', role: 'member' });
  const strangers = await signup(app);
  const theirs = await makeTicket(strangers.live, `/v1/brands/${(await makeBrand(strangers.live)).id}`, { title: 'theirs', assigneeId: strangers.ownerId });

  const mine = [
    await makeTicket(owner.live, live, { title: 'l', assigneeId: owner.ownerId }),
    await makeTicket(owner.live, live2, { title: 'l2', assigneeId: owner.ownerId }),
    await makeTicket(owner.test, test, { title: 't', assigneeId: owner.ownerId }),
  ];
  const mids = [
    await makeTicket(owner.live, live, { title: 'm', assigneeId: mid }),
    await makeTicket(owner.live, live2, { title: 'm2', assigneeId: mid }),
    await makeTicket(owner.test, test, { title: 'm3', assigneeId: mid }),
  ];
  t.same(await sortedBy(owner.live, live, 'assignee'), [mids[0].id, mine[0].id], 'Mid before Test Owner');

  await notifyUser('user_assignee', email, 'Aaron', 'Able');
  t.same(await assigneeSorts(...mine.map((x) => x.id)), ['aaron able', 'aaron able', 'aaron able']);
  t.same(await sortedBy(owner.live, live, 'assignee'), [mine[0].id, mids[0].id], 'Aaron Able before Mid');
  t.same(await sortedBy(owner.live, live2, 'assignee'), [mine[1].id, mids[1].id], 'in the second brand too');
  t.same(await sortedBy(owner.test, test, 'assignee'), [mine[2].id, mids[2].id], 'and in test mode');
  t.same(await assigneeSorts(...mids.map((x) => x.id), theirs.id), ['mid', 'mid', 'mid', 'test owner'], "other members' tickets and other accounts' keep theirs");
});

t.test('field rules follow every change of the definitions: create, update, reorder, delete', async (t) => {
  const { owner, brand, base } = await setup();
  const rulesNow = async () => (await db('brands').where({ id: brand.id }).first('field_rules')).fieldRules;
  // What the rules must be: the definitions as the API lists them (display order).
  const expected = async () => {
    const all = await ok(owner.live, 'GET', `${base}/fields`);
    const out: Record<string, unknown[]> = {};
    for (const entity of ['ticket', 'customer', 'company'] as const) {
      const defs = all[entity] as { key: string; type: string; options: string[] | null; required: boolean }[];
      if (defs.length) out[entity] = defs.map((d) => ({ key: d.key, type: d.type, options: d.options, required: d.required }));
    }
    return out;
  };
  const create = (body: unknown) => owner.live('POST', `${base}/tickets`, body);

  t.same(await rulesNow(), {});
  await ok(owner.live, 'POST', `${base}/fields/ticket`, { key: 'tier', label: 'Tier', type: 'select', options: ['a', 'b'], required: true });
  await ok(owner.live, 'POST', `${base}/fields/ticket`, { key: 'ref', label: 'Ref', type: 'text' });
  await ok(owner.live, 'POST', `${base}/fields/company`, { key: 'size', label: 'Size', type: 'number' });
  t.same(await rulesNow(), await expected());
  t.equal((await create({ title: 'x' })).status, 400, 'the required field is enforced at once');
  t.equal((await create({ title: 'x', customFields: { tier: 'c' } })).status, 400, 'and its options');
  t.equal((await create({ title: 'x', customFields: { tier: 'b' } })).status, 201);

  await ok(owner.live, 'PATCH', `${base}/fields/ticket/tier`, { options: ['a', 'b', 'c'], required: false });
  t.same(await rulesNow(), await expected());
  t.equal((await create({ title: 'x', customFields: { tier: 'c' } })).status, 201, 'the new option is taken');
  t.equal((await create({ title: 'x' })).status, 201, 'no longer required');

  await ok(owner.live, 'POST', `${base}/fields/ticket/reorder`, { keys: ['ref', 'tier'] });
  t.same(
    (await rulesNow()).ticket.map((r: { key: string }) => r.key),
    ['ref', 'tier'],
  );
  t.same(await rulesNow(), await expected());

  await ok(owner.live, 'DELETE', `${base}/fields/ticket/tier`);
  await ok(owner.live, 'DELETE', `${base}/fields/company/size`);
  t.same(await rulesNow(), await expected());
  t.equal((await create({ title: 'x', customFields: { tier: 'anything' } })).status, 201, 'a deleted field no longer constrains');

  // A refused change leaves them as they were.
  t.equal((await owner.live('POST', `${base}/fields/ticket`, { key: 'ref', label: 'Again', type: 'text' })).status, 409);
  t.same(await rulesNow(), await expected());
});

t.test('concurrent definition changes in one brand: the rules hold every one', async (t) => {
  const { owner, brand, base } = await setup();
  const keys = Array.from({ length: 8 }, (_, i) => `k${i}`);
  const results = await Promise.all(keys.map((key) => owner.live('POST', `${base}/fields/ticket`, { key, label: key, type: 'text', required: true })));
  t.same(
    results.map((r) => r.status),
    keys.map(() => 201),
  );
  const rules = (await db('brands').where({ id: brand.id }).first('field_rules')).fieldRules;
  t.same(rules.ticket.map((r: { key: string }) => r.key).sort(), keys);
  await Promise.all(keys.slice(0, 4).map((key) => owner.live('DELETE', `${base}/fields/ticket/${key}`)));
  const after = (await db('brands').where({ id: brand.id }).first('field_rules')).fieldRules;
  t.same(after.ticket.map((r: { key: string }) => r.key).sort(), keys.slice(4));
});
