import t from 'tap';
import { newId } from '../../server/core/ids.js';
import { assertErrorShape, assertNotFound, client, makeBrand, makeTicket, ownerWithBrand, type Reply, type Signup, testApp } from '../helpers/app.js';
import { faultTriggerDdl } from '../helpers/db.js';

// Every test signs up its own accounts: lift the per-hour signup limit for this file.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const anonymous = client(app);

type Call = Signup['live'];

const setup = () => ownerWithBrand(app);

async function addMember(accountId: string, name: string, email: string): Promise<string> {
  const id = newId('mem');
  await db('members').insert({ id, accountId, email, name, role: 'member' });
  return id;
}

interface Entry {
  event: string;
  changes: { field: string; from: unknown; to: unknown }[];
  metadata: Record<string, unknown>;
}
const entries = async (ticketId: string): Promise<Entry[]> => db('auditLog').where({ ticketId }).orderBy('id').select('event', 'changes', 'metadata');
const events = async (ticketId: string) => (await entries(ticketId)).map((e) => e.event);

const listIds = async (call: Call, url: string): Promise<string[]> => {
  const res = await call('GET', url);
  if (res.status !== 200) throw new Error(`list failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data.map((x: { id: string }) => x.id);
};
const blocked = async (call: Call, base: string): Promise<string[]> =>
  (await call('GET', `${base}/blocked-sources`)).body.map((b: { type: string; value: string }) => `${b.type}:${b.value}`).sort();
const fieldsNamed = (res: Reply): string[] => (res.body?.errors ?? []).map((e: { field: string }) => e.field);

// ---------------------------------------------------------------------------------------------
// Spam
// ---------------------------------------------------------------------------------------------

for (const prefix of ['/v1/brands', '/v1/workspaces'] as const) {
  t.test(`${prefix}: marking spam flags the ticket, blocks the sender, and hides it from the default list`, async (t) => {
    const { owner, brand, base } = await setup();
    const path = `${prefix}/${prefix === '/v1/workspaces' ? `ws_${brand.id.slice(3)}` : brand.id}`;
    const tk = await makeTicket(owner.live, base, { title: 'Buy pills', customerEmail: 'Spammer@Example.com' });
    const keep = await makeTicket(owner.live, base, { title: 'Real question', customerEmail: 'ann@example.com' });

    const res = await owner.live('POST', `${path}/tickets/${tk.id}/spam`, { isSpam: true });
    t.equal(res.status, 200);
    t.equal(res.body.id, tk.id);
    t.equal(res.body.isSpam, true);
    t.not(res.body.updatedAt, tk.updatedAt, 'updatedAt moved');
    t.same(await blocked(owner.live, base), ['email:spammer@example.com'], 'the sender address is blocked');
    t.same(await listIds(owner.live, `${base}/tickets`), [keep.id], 'the default list leaves spam out');
    t.same(await listIds(owner.live, `${base}/tickets?isSpam=true`), [tk.id], 'isSpam=true lists it');

    const next = await makeTicket(owner.live, base, { title: 'Again', customerEmail: 'spammer@example.com' });
    t.equal(next.isSpam, true, 'the next ticket from that sender is spam on arrival');
    t.equal((await makeTicket(owner.live, base, { title: 'Other', customerEmail: 'other@example.com' })).isSpam, false, 'other senders are not');

    const log = await entries(tk.id);
    t.same(
      log.map((e) => e.event),
      ['ticket.created', 'ticket.spam_marked'],
    );
    t.same(log[1]!.changes, [{ field: 'isSpam', from: false, to: true }]);
    t.match(log[1]!.metadata, { ticketNumber: tk.ticketNumber, sender: 'spammer@example.com' });
  });
}

t.test('spam: both body spellings; unmarking restores the ticket and unblocks the exact address', async (t) => {
  const { owner, base } = await setup();
  const tk = await makeTicket(owner.live, base, { title: 'x', customerEmail: 'bob@example.com' });

  const marked = await owner.live('POST', `${base}/tickets/${tk.id}/spam`, { action: 'mark' });
  t.equal(marked.status, 200);
  t.equal(marked.body.isSpam, true, '{ action: "mark" } marks');
  t.same(await blocked(owner.live, base), ['email:bob@example.com']);

  const unmarked = await owner.live('POST', `${base}/tickets/${tk.id}/spam`, { isSpam: false });
  t.equal(unmarked.status, 200);
  t.equal(unmarked.body.isSpam, false, '{ isSpam: false } unmarks');
  t.same(await blocked(owner.live, base), [], 'the address block is gone');
  t.same(await listIds(owner.live, `${base}/tickets`), [tk.id], 'back in the default list');
  t.equal((await makeTicket(owner.live, base, { title: 'y', customerEmail: 'bob@example.com' })).isSpam, false, 'later tickets from the sender are not spam');

  t.equal((await owner.live('POST', `${base}/tickets/${tk.id}/spam`, { isSpam: true })).body.isSpam, true);
  const viaAction = await owner.live('POST', `${base}/tickets/${tk.id}/spam`, { action: 'unmark' });
  t.equal(viaAction.body.isSpam, false, '{ action: "unmark" } unmarks');
  const log = await entries(tk.id);
  t.same(
    log.map((e) => e.event),
    ['ticket.created', 'ticket.spam_marked', 'ticket.spam_unmarked', 'ticket.spam_marked', 'ticket.spam_unmarked'],
  );
  t.same(log[2]!.changes, [{ field: 'isSpam', from: true, to: false }]);
});

t.test('spam is idempotent: marking a spam ticket again changes nothing and writes no entry', async (t) => {
  const { owner, base } = await setup();
  const tk = await makeTicket(owner.live, base, { title: 'x', customerEmail: 'eve@example.com' });
  const first = (await owner.live('POST', `${base}/tickets/${tk.id}/spam`, { isSpam: true })).body;
  const again = await owner.live('POST', `${base}/tickets/${tk.id}/spam`, { action: 'mark' });
  t.equal(again.status, 200);
  t.same(again.body, first, 'the same ticket, updatedAt unchanged');
  t.same(await events(tk.id), ['ticket.created', 'ticket.spam_marked'], 'one entry');
  t.same(await blocked(owner.live, base), ['email:eve@example.com'], 'one block');

  const clean = await makeTicket(owner.live, base, { title: 'fine' });
  const unmark = await owner.live('POST', `${base}/tickets/${clean.id}/spam`, { isSpam: false });
  t.equal(unmark.status, 200);
  t.equal(unmark.body.updatedAt, clean.updatedAt, 'unmarking a clean ticket changes nothing');
  t.same(await events(clean.id), ['ticket.created']);
});

t.test('spam: an existing block is not duplicated; a domain block survives unmarking; no customer, no block', async (t) => {
  const { owner, base } = await setup();
  const tk = await makeTicket(owner.live, base, { title: 'x', customerEmail: 'dup@example.com' });
  t.equal((await owner.live('POST', `${base}/blocked-sources`, { value: 'dup@example.com', reason: 'by hand' })).status, 201);
  t.equal((await owner.live('POST', `${base}/tickets/${tk.id}/spam`, { isSpam: true })).status, 200);
  const list = (await owner.live('GET', `${base}/blocked-sources`)).body;
  t.equal(list.length, 1, 'still one block');
  t.equal(list[0].reason, 'by hand', 'the existing block is kept as it was');

  t.equal((await owner.live('POST', `${base}/blocked-sources`, { value: 'bad.test' })).status, 201);
  const fromDomain = await makeTicket(owner.live, base, { title: 'x', customerEmail: 'a@bad.test' });
  t.equal(fromDomain.isSpam, true, 'spam on arrival (domain block)');
  t.equal((await owner.live('POST', `${base}/tickets/${fromDomain.id}/spam`, { isSpam: false })).body.isSpam, false, 'unmarked');
  t.same(await blocked(owner.live, base), ['domain:bad.test', 'email:dup@example.com'], 'the domain block stays');
  t.equal((await makeTicket(owner.live, base, { title: 'x', customerEmail: 'a@bad.test' })).isSpam, true, 'so the next one is spam again');

  const anonymousTicket = await makeTicket(owner.live, base, { title: 'no customer' });
  t.equal((await owner.live('POST', `${base}/tickets/${anonymousTicket.id}/spam`, { isSpam: true })).body.isSpam, true);
  t.same(await blocked(owner.live, base), ['domain:bad.test', 'email:dup@example.com'], 'nothing to block');
});

t.test('spam: bad bodies are 400; out-of-reach tickets are 404; no key is 401', async (t) => {
  const { owner, brand, base } = await setup();
  const tk = await makeTicket(owner.live, base, { title: 'x', customerEmail: 'z@example.com' });
  const url = `${base}/tickets/${tk.id}/spam`;
  assertErrorShape(t, await owner.live('POST', url, {}), 400, 'invalid_spam_request');
  assertErrorShape(t, await owner.live('POST', url), 400, 'invalid_spam_request');
  const both = await owner.live('POST', url, { isSpam: true, action: 'mark' });
  assertErrorShape(t, both, 400, 'invalid_spam_request');
  t.same(fieldsNamed(both), ['action']);
  for (const body of [{ isSpam: 'yes' }, { action: 'maybe' }, { isSpam: true, reason: 'x' }]) {
    const res = await owner.live('POST', url, body);
    assertErrorShape(t, res, 400, 'validation_failed');
  }
  t.equal((await owner.live('GET', `${base}/tickets/${tk.id}`)).body.isSpam, false, 'nothing changed');

  const other = await makeBrand(owner.live, 'Other');
  const stranger = await setup();
  const testBrand = await makeBrand(owner.test);
  assertNotFound(t, await owner.live('POST', `/v1/brands/${other.id}/tickets/${tk.id}/spam`, { isSpam: true }), 'another brand');
  assertNotFound(t, await stranger.owner.live('POST', url, { isSpam: true }), 'another account (brand)');
  assertNotFound(t, await stranger.owner.live('POST', `${stranger.base}/tickets/${tk.id}/spam`, { isSpam: true }), 'another account (own brand)');
  assertNotFound(t, await owner.test('POST', url, { isSpam: true }), 'the other mode');
  assertNotFound(t, await owner.test('POST', `/v1/brands/${testBrand.id}/tickets/${tk.id}/spam`, { isSpam: true }), 'the other mode (own brand)');
  assertNotFound(t, await owner.live('POST', `${base}/tickets/tkt_nope/spam`, { isSpam: true }), 'unknown id');
  t.equal((await owner.live('DELETE', `${base}/tickets/${tk.id}`)).status, 200);
  assertNotFound(t, await owner.live('POST', url, { isSpam: true }), 'deleted');
  assertErrorShape(t, await anonymous('POST', url, { isSpam: true }), 401, 'missing_credentials');
  t.same(await blocked(owner.live, base), [], 'nothing was blocked');
  t.equal(brand.id, tk.brandId);
});

// ---------------------------------------------------------------------------------------------
// Bulk
// ---------------------------------------------------------------------------------------------

const bulk = (call: Call, base: string, body: unknown) => call('POST', `${base}/tickets/bulk`, body);

t.test('bulk resolve and close: counts, only changed tickets get an entry, closeReason', async (t) => {
  const { owner, base } = await setup();
  const a = await makeTicket(owner.live, base, { title: 'a' });
  const b = await makeTicket(owner.live, base, { title: 'b', status: 'resolved' });
  const c = await makeTicket(owner.live, base, { title: 'c', status: 'pending' });

  const res = await bulk(owner.live, base, { action: 'resolve', ticketIds: [c.id, a.id, b.id] });
  t.equal(res.status, 200);
  t.same(res.body, { success: true, count: 3, failed: 0, failedIds: [] });
  for (const tk of [a, b, c]) t.equal((await owner.live('GET', `${base}/tickets/${tk.id}`)).body.status, 'resolved');
  t.same(await events(a.id), ['ticket.created', 'ticket.updated']);
  t.same(await events(b.id), ['ticket.created'], 'already resolved: no entry');
  const [, updated] = await entries(c.id);
  t.same(updated!.changes, [{ field: 'status', from: 'pending', to: 'resolved' }]);
  t.match(updated!.metadata, { ticketNumber: c.ticketNumber, title: 'c', bulk: true });
  t.equal((await owner.live('GET', `${base}/tickets/${b.id}`)).body.updatedAt, b.updatedAt, 'unchanged ticket keeps updatedAt');

  const closed = await bulk(owner.live, base, { action: 'close', ticketIds: [a.id, b.id], closeReason: 'duplicate' });
  t.same(closed.body, { success: true, count: 2, failed: 0, failedIds: [] });
  const got = (await owner.live('GET', `${base}/tickets/${a.id}`)).body;
  t.match(got, { status: 'closed', closeReason: 'duplicate' });
  t.same((await entries(a.id))[2]!.changes, [
    { field: 'status', from: 'resolved', to: 'closed' },
    { field: 'closeReason', from: null, to: 'duplicate' },
  ]);

  t.equal((await bulk(owner.live, base, { action: 'close', ticketIds: [c.id] })).status, 200, 'close without a reason');
  t.match((await owner.live('GET', `${base}/tickets/${c.id}`)).body, { status: 'closed', closeReason: null });
  t.equal((await bulk(owner.live, base, { action: 'close', ticketIds: [a.id], closeReason: null })).status, 200, 'closeReason null clears');
  t.equal((await owner.live('GET', `${base}/tickets/${a.id}`)).body.closeReason, null);
});

t.test('bulk assign, setCategory, setTags (names or ids, full replacement), null clears', async (t) => {
  const { owner, base } = await setup();
  const agent = await addMember(owner.accountId, 'Agent Smith', 'smith@example.com');
  const cat = (await owner.live('POST', `${base}/categories`, { name: 'Billing' })).body;
  const vip = (await owner.live('POST', `${base}/tags`, { name: 'vip' })).body;
  const a = await makeTicket(owner.live, base, { title: 'a', tags: ['old'] });
  const b = await makeTicket(owner.live, base, { title: 'b', assigneeId: agent, categoryId: cat.id, tags: [vip.id, 'Login'] });
  const ids = [a.id, b.id];
  const get = async (id: string) => (await owner.live('GET', `${base}/tickets/${id}`)).body;

  t.same((await bulk(owner.live, base, { action: 'assign', ticketIds: ids, assigneeId: agent })).body, { success: true, count: 2, failed: 0, failedIds: [] });
  t.equal((await get(a.id)).assigneeId, agent);
  t.same(await events(b.id), ['ticket.created'], 'already assigned: no entry');
  t.same((await entries(a.id))[1]!.changes, [{ field: 'assigneeId', from: null, to: agent }]);
  t.equal((await bulk(owner.live, base, { action: 'assign', ticketIds: ids, assigneeId: null })).status, 200);
  t.same([(await get(a.id)).assigneeId, (await get(b.id)).assigneeId], [null, null], 'null unassigns');

  t.equal((await bulk(owner.live, base, { action: 'setCategory', ticketIds: ids, categoryId: cat.id })).status, 200);
  t.same((await get(a.id)).category, { id: cat.id, name: 'Billing', color: cat.color });
  t.equal((await bulk(owner.live, base, { action: 'setCategory', ticketIds: [a.id], categoryId: null })).status, 200);
  t.equal((await get(a.id)).categoryId, null, 'null clears');
  t.equal((await get(b.id)).categoryId, cat.id);

  const before = (await entries(b.id)).length;
  const tagged = await bulk(owner.live, base, { action: 'setTags', ticketIds: ids, tags: ['login', vip.id, 'New One'] });
  t.equal(tagged.status, 200);
  const names = async (id: string) => (await get(id)).tags.map((g: { name: string }) => g.name).sort();
  t.same(await names(a.id), ['Login', 'New One', 'vip'], 'a: old dropped; names matched ignoring case, new names created');
  t.same(await names(b.id), ['Login', 'New One', 'vip']);
  const last = (await entries(b.id)).slice(before);
  t.equal(last.length, 1, 'one entry per changed ticket');
  t.equal(last[0]!.changes[0]!.field, 'tags');
  t.same(last[0]!.changes[0]!.to, [...(await get(b.id)).tags.map((g: { id: string }) => g.id)].sort(), 'changes list sorted tag ids');
  const tagCount = (await owner.live('GET', `${base}/tags`)).body.length;
  t.equal(tagCount, 4, 'old, vip, Login, New One: no duplicates');

  const again = (await entries(a.id)).length;
  t.equal((await bulk(owner.live, base, { action: 'setTags', ticketIds: ids, tags: ['VIP', 'login', 'new one'] })).status, 200);
  t.equal((await entries(a.id)).length, again, 'the same set again: no entry');
  t.equal((await bulk(owner.live, base, { action: 'setTags', ticketIds: [a.id], tags: [] })).status, 200);
  t.same((await get(a.id)).tags, [], 'an empty list clears');
  t.equal((await get(b.id)).tags.length, 3, 'other tickets untouched');
});

t.test('bulk delete and spam; missing, deleted, other brand, other account and other mode ids count as failed', async (t) => {
  const { owner, base } = await setup();
  const stranger = await setup();
  const other = await makeBrand(owner.live, 'Other');
  const testBrand = await makeBrand(owner.test);
  const a = await makeTicket(owner.live, base, { title: 'a', customerEmail: 'one@example.com' });
  const b = await makeTicket(owner.live, base, { title: 'b', customerEmail: 'two@example.com' });
  const c = await makeTicket(owner.live, base, { title: 'c', customerEmail: 'one@example.com' });
  const gone = await makeTicket(owner.live, base, { title: 'gone' });
  t.equal((await owner.live('DELETE', `${base}/tickets/${gone.id}`)).status, 200);
  const otherBrand = await makeTicket(owner.live, `/v1/brands/${other.id}`, { title: 'other brand' });
  const foreign = await makeTicket(stranger.owner.live, stranger.base, { title: 'foreign' });
  const testTicket = await makeTicket(owner.test, `/v1/brands/${testBrand.id}`, { title: 'test mode' });
  const strangers = [gone.id, otherBrand.id, foreign.id, testTicket.id, 'tkt_nope'];

  const spam = await bulk(owner.live, base, { action: 'spam', ticketIds: [a.id, ...strangers, b.id, c.id] });
  t.equal(spam.status, 200);
  t.same(spam.body, { success: false, count: 3, failed: 5, failedIds: strangers });
  t.same(await blocked(owner.live, base), ['email:one@example.com', 'email:two@example.com'], 'each sender blocked once');
  t.same(await listIds(owner.live, `${base}/tickets`), [], 'all three left the default list');
  t.same(await events(a.id), ['ticket.created', 'ticket.spam_marked']);
  t.equal((await makeTicket(owner.live, base, { title: 'x', customerEmail: 'two@example.com' })).isSpam, true);
  for (const [call, path, id] of [
    [owner.live, `/v1/brands/${other.id}`, otherBrand.id],
    [stranger.owner.live, stranger.base, foreign.id],
    [owner.test, `/v1/brands/${testBrand.id}`, testTicket.id],
  ] as const) {
    const tk = (await call('GET', `${path}/tickets/${id}`)).body;
    t.equal(tk.isSpam, false, `${tk.title}: untouched`);
    t.same(await events(id), ['ticket.created']);
  }

  const deleted = await bulk(owner.live, base, { action: 'delete', ticketIds: [a.id, b.id, gone.id] });
  t.same(deleted.body, { success: false, count: 2, failed: 1, failedIds: [gone.id] });
  assertNotFound(t, await owner.live('GET', `${base}/tickets/${a.id}`), 'deleted by bulk');
  t.same(await events(b.id), ['ticket.created', 'ticket.spam_marked', 'ticket.deleted']);
  t.equal((await owner.live('GET', `${base}/tickets/${c.id}`)).status, 200, 'not named: still there');

  const none = await bulk(owner.live, base, { action: 'resolve', ticketIds: strangers });
  t.same(none.body, { success: false, count: 0, failed: 5, failedIds: strangers }, 'nothing found is still a 200');
});

t.test('bulk: bad parameters are a 400 for the whole request and change nothing', async (t) => {
  const { owner, base } = await setup();
  const stranger = await setup();
  const other = await makeBrand(owner.live, 'Other');
  const otherCategory = (await owner.live('POST', `/v1/brands/${other.id}/categories`, { name: 'Elsewhere' })).body;
  const otherTag = (await owner.live('POST', `/v1/brands/${other.id}/tags`, { name: 'elsewhere' })).body;
  const a = await makeTicket(owner.live, base, { title: 'a' });
  const ids = [a.id];
  const cases: [string, Record<string, unknown>, string, string][] = [
    ['unknown action', { action: 'archive', ticketIds: ids }, 'validation_failed', 'action'],
    ['no action', { ticketIds: ids }, 'validation_failed', 'action'],
    ['no ticketIds', { action: 'resolve' }, 'validation_failed', 'ticketIds'],
    ['empty ticketIds', { action: 'resolve', ticketIds: [] }, 'validation_failed', 'ticketIds'],
    ['101 ticketIds', { action: 'resolve', ticketIds: Array.from({ length: 101 }, (_, i) => `tkt_${i}`) }, 'validation_failed', 'ticketIds'],
    ['duplicate ticketIds', { action: 'resolve', ticketIds: [a.id, a.id] }, 'validation_failed', 'ticketIds'],
    ['unknown field', { action: 'resolve', ticketIds: ids, status: 'open' }, 'validation_failed', 'status'],
    ['assign without assigneeId', { action: 'assign', ticketIds: ids }, 'invalid_bulk_parameters', 'assigneeId'],
    ['setCategory without categoryId', { action: 'setCategory', ticketIds: ids }, 'invalid_bulk_parameters', 'categoryId'],
    ['setTags without tags', { action: 'setTags', ticketIds: ids }, 'invalid_bulk_parameters', 'tags'],
    ['a parameter the action does not take', { action: 'resolve', ticketIds: ids, closeReason: 'duplicate' }, 'invalid_bulk_parameters', 'closeReason'],
    ['unknown close reason', { action: 'close', ticketIds: ids, closeReason: 'bored' }, 'validation_failed', 'closeReason'],
    ['member of another account', { action: 'assign', ticketIds: ids, assigneeId: stranger.owner.ownerId }, 'invalid_assignee', 'assigneeId'],
    ['unknown member', { action: 'assign', ticketIds: ids, assigneeId: 'mem_nope' }, 'invalid_assignee', 'assigneeId'],
    ['category of another brand', { action: 'setCategory', ticketIds: ids, categoryId: otherCategory.id }, 'invalid_category', 'categoryId'],
    ['tag id of another brand', { action: 'setTags', ticketIds: ids, tags: ['brand new', otherTag.id] }, 'invalid_tags', 'tags'],
  ];
  for (const [label, body, code, field] of cases) {
    const res = await bulk(owner.live, base, body);
    t.equal(res.status, 400, `${label}: 400`);
    assertErrorShape(t, res, 400, code);
    t.ok(
      fieldsNamed(res).some((f) => f.startsWith(field)),
      `${label}: names ${field} (${JSON.stringify(fieldsNamed(res))})`,
    );
  }
  const after = (await owner.live('GET', `${base}/tickets/${a.id}`)).body;
  t.same(after, a, 'the ticket is as created');
  t.same(await events(a.id), ['ticket.created']);
  t.notOk(
    (await owner.live('GET', `${base}/tags`)).body.some((g: { name: string }) => g.name === 'brand new'),
    'no tag was created',
  );
  assertErrorShape(t, await anonymous('POST', `${base}/tickets/bulk`, { action: 'resolve', ticketIds: ids }), 401, 'missing_credentials');
  assertNotFound(t, await bulk(stranger.owner.live, base, { action: 'resolve', ticketIds: ids }), "another account's brand");
  assertNotFound(t, await bulk(owner.test, base, { action: 'resolve', ticketIds: ids }), "the other mode's brand");
});

t.test('bulk is one transaction: a failure midway leaves every ticket and the log as they were', async (t) => {
  const { owner, base } = await setup();
  const tickets = [];
  for (const title of ['a', 'b', 'c']) tickets.push(await makeTicket(owner.live, base, { title, customerEmail: `${title}@example.com` }));
  const ids = tickets.map((tk) => tk.id);
  // Fail the audit entry of the second ticket: the tickets' UPDATE has run by then.
  await faultTriggerDdl(
    db,
    `CREATE FUNCTION fail_for_test() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.entity_id = '${ids[1]}' THEN RAISE EXCEPTION 'forced failure'; END IF; RETURN NEW; END $$`,
    'CREATE TRIGGER fail_for_test BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION fail_for_test()',
  );

  try {
    for (const body of [{ action: 'resolve' }, { action: 'spam' }, { action: 'delete' }, { action: 'setTags', tags: ['x'] }]) {
      const res = await bulk(owner.live, base, { ...body, ticketIds: ids });
      t.equal(res.status, 500, `${body.action}: the forced failure surfaces`);
      for (const tk of tickets) t.same((await owner.live('GET', `${base}/tickets/${tk.id}`)).body, tk, `${body.action}: ${tk.title} unchanged`);
    }
  } finally {
    await faultTriggerDdl(db, 'DROP TRIGGER fail_for_test ON audit_log', 'DROP FUNCTION fail_for_test()');
  }
  for (const id of ids) t.same(await events(id), ['ticket.created'], 'no entries');
  t.same(await blocked(owner.live, base), [], 'no sender was blocked');
  t.notOk((await owner.live('GET', `${base}/tags`)).body.length, 'no tag was created');
  t.same((await bulk(owner.live, base, { action: 'resolve', ticketIds: ids })).body.count, 3, 'works again without the trigger');
});

t.test('concurrent bulks over overlapping tickets, named in any order, all succeed (no deadlock)', async (t) => {
  const { owner, base } = await setup();
  const agent = await addMember(owner.accountId, 'Agent', 'agent@example.com');
  const tickets = [];
  for (let i = 0; i < 12; i++) tickets.push(await makeTicket(owner.live, base, { title: `t${i}`, customerEmail: `c${i % 4}@example.com` }));
  const ids = tickets.map((tk) => tk.id);
  const shuffled = (seed: number) => [...ids].sort((x, y) => ((x.charCodeAt(x.length - 1) * seed) % 17) - ((y.charCodeAt(y.length - 1) * seed) % 17) || (x < y ? 1 : -1));
  const bodies = [
    { action: 'resolve' },
    { action: 'assign', assigneeId: agent },
    { action: 'setTags', tags: ['zeta', 'alpha', 'mid'] },
    { action: 'setTags', tags: ['mid', 'zeta', 'beta'] },
    { action: 'close', closeReason: 'no_response' },
    { action: 'spam' },
    { action: 'setCategory', categoryId: null },
    { action: 'assign', assigneeId: null },
  ];
  const results = await Promise.all([...bodies, ...bodies].map((body, i) => bulk(owner.live, base, { ...body, ticketIds: shuffled(i + 2).slice(i % 3, 12 - (i % 2)) })));
  t.same(
    results.map((r) => r.status),
    Array(results.length).fill(200),
    'every bulk succeeded',
  );
  t.ok(
    results.every((r) => r.body.failed === 0),
    'no ticket failed',
  );
  const tagNames = (await owner.live('GET', `${base}/tags`)).body.map((g: { name: string }) => g.name).sort();
  t.same(tagNames, ['alpha', 'beta', 'mid', 'zeta'], 'each new tag created once');
  t.same(await blocked(owner.live, base), ['email:c0@example.com', 'email:c1@example.com', 'email:c2@example.com', 'email:c3@example.com']);
});

t.test('bulk via the workspaces path', async (t) => {
  const { owner, brand, base } = await setup();
  const a = await makeTicket(owner.live, base, { title: 'a' });
  const res = await bulk(owner.live, `/v1/workspaces/ws_${brand.id.slice(3)}`, { action: 'close', ticketIds: [a.id], closeReason: 'customer_left' });
  t.same(res.body, { success: true, count: 1, failed: 0, failedIds: [] });
  t.match((await owner.live('GET', `${base}/tickets/${a.id}`)).body, { status: 'closed', closeReason: 'customer_left' });
});

// ---------------------------------------------------------------------------------------------
// closeReason and dueAt
// ---------------------------------------------------------------------------------------------

t.test('closeReason and dueAt: create, PATCH (null clears, changes recorded), validation', async (t) => {
  const { owner, base } = await setup();
  const plain = await makeTicket(owner.live, base, { title: 'plain' });
  t.match(plain, { closeReason: null, dueAt: null });
  const tk = await makeTicket(owner.live, base, { title: 'x', status: 'closed', closeReason: 'out_of_scope', dueAt: '2030-01-15T10:00:00+02:00' });
  t.equal(tk.closeReason, 'out_of_scope');
  t.equal(tk.dueAt, '2030-01-15T08:00:00.000Z', 'dueAt is stored and returned in UTC');
  t.same((await owner.live('GET', `${base}/tickets/${tk.id}`)).body, tk);

  const patched = await owner.live('PATCH', `${base}/tickets/${tk.id}`, { closeReason: 'duplicate', dueAt: '2030-02-01T00:00:00.123Z' });
  t.equal(patched.status, 200);
  t.match(patched.body, { closeReason: 'duplicate', dueAt: '2030-02-01T00:00:00.123Z' });
  t.same((await entries(tk.id))[1]!.changes, [
    { field: 'closeReason', from: 'out_of_scope', to: 'duplicate' },
    { field: 'dueAt', from: '2030-01-15T08:00:00.000Z', to: '2030-02-01T00:00:00.123Z' },
  ]);
  const same = await owner.live('PATCH', `${base}/tickets/${tk.id}`, { dueAt: '2030-02-01T01:00:00.123+01:00' });
  t.equal(same.body.updatedAt, patched.body.updatedAt, 'the same instant in another offset is no change');
  const cleared = await owner.live('PATCH', `${base}/tickets/${tk.id}`, { closeReason: null, dueAt: null });
  t.match(cleared.body, { closeReason: null, dueAt: null });
  t.equal((await entries(tk.id)).length, 3);

  for (const body of [{ closeReason: 'bored' }, { dueAt: 'tomorrow' }, { dueAt: '2030-13-01T00:00:00Z' }]) {
    assertErrorShape(t, await owner.live('PATCH', `${base}/tickets/${tk.id}`, body), 400, 'validation_failed');
    assertErrorShape(t, await owner.live('POST', `${base}/tickets`, { title: 'x', ...body }), 400, 'validation_failed');
  }
});

t.test('sort=dueAt: soonest first ascending, tickets without one last; the cursor walks it exactly', async (t) => {
  const { owner, base } = await setup();
  const due = ['2030-03-01T00:00:00.000Z', null, '2030-01-01T00:00:00.000Z', '2030-03-01T00:00:00.000Z', null, '2029-12-31T23:59:59.999Z', '2030-01-01T00:00:00.001Z'];
  const made: { id: string; dueAt: string | null }[] = [];
  for (const [i, dueAt] of due.entries()) made.push(await makeTicket(owner.live, base, { title: `t${i}`, ...(dueAt ? { dueAt } : {}) }));
  const key = (x: { dueAt: string | null }) => (x.dueAt ? Date.parse(x.dueAt) : Infinity);
  const asc = [...made].sort((x, y) => key(x) - key(y) || (x.id < y.id ? -1 : 1)).map((x) => x.id);

  for (const [order, expected] of [
    ['asc', asc],
    ['desc', [...asc].reverse()],
  ] as const) {
    const walked: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res: Reply = await owner.live('GET', `${base}/tickets?sort=dueAt&order=${order}&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      t.equal(res.status, 200);
      walked.push(...res.body.data.map((x: { id: string }) => x.id));
      cursor = res.body.pagination.nextCursor;
      pages++;
    } while (cursor);
    t.same(walked, expected, `${order}: every ticket once, in order`);
    t.equal(pages, 4);
  }
  const bad = await owner.live('GET', `${base}/tickets?sort=dueSoon`);
  assertErrorShape(t, bad, 400, 'validation_failed');
});

t.test('the action routes are in the OpenAPI document', async (t) => {
  const doc = (await anonymous('GET', '/v1/openapi.json')).body;
  for (const prefix of ['/v1/brands/{brandId}', '/v1/workspaces/{brandId}']) {
    t.ok(doc.paths[`${prefix}/tickets/{ticketId}/spam`]?.post, `${prefix} spam`);
    t.ok(doc.paths[`${prefix}/tickets/bulk`]?.post, `${prefix} bulk`);
  }
  t.ok(
    doc.paths['/v1/brands/{brandId}/tickets']?.get.parameters.some(
      (p: { name: string; schema: { anyOf?: { const: string }[] } }) => p.name === 'sort' && JSON.stringify(p.schema).includes('dueAt'),
    ),
    'dueAt is a documented sort',
  );
});
