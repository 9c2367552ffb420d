import t from 'tap';
import { newId } from '../../server/core/ids.js';
import { assertErrorShape, assertNotFound, client, makeBrand, makeTicket, ownerWithBrand, type Reply, testApp } from '../helpers/app.js';
import { onCitusCluster } from '../helpers/db.js';

// Every test signs up its own accounts: lift the per-hour signup limit for this file.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const anonymous = client(app);

const WATCHER_ID = /^wch_[0-9a-z]{26}$/;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

const setup = () => ownerWithBrand(app);

async function addMember(accountId: string, name: string | null, email: string): Promise<string> {
  const id = newId('mem');
  await db('members').insert({ id, accountId, email, name, role: 'member' });
  return id;
}

const events = async (ticketId: string): Promise<string[]> => (await db('auditLog').where({ ticketId }).orderBy('id').select('event')).map((e: { event: string }) => e.event);
const fieldsNamed = (res: Reply): string[] => (res.body?.errors ?? []).map((e: { field: string }) => e.field);

for (const prefix of ['/v1/brands', '/v1/workspaces'] as const) {
  t.test(`${prefix}: add, list, update and remove a watcher`, async (t) => {
    const { owner, brand, base } = await setup();
    const path = `${prefix}/${prefix === '/v1/workspaces' ? `ws_${brand.id.slice(3)}` : brand.id}`;
    const tk = await makeTicket(owner.live, base, { title: 'Watch me' });
    const url = `${path}/tickets/${tk.id}/watchers`;
    t.same((await owner.live('GET', url)).body, [], 'nobody watches a new ticket');

    const added = await owner.live('POST', url, { memberId: owner.ownerId });
    t.equal(added.status, 201);
    const w = added.body;
    t.match(w.id, WATCHER_ID);
    t.match(w, { ticketId: tk.id, memberId: owner.ownerId, memberName: 'Test Owner', notifyOnComment: true, notifyOnStatusChange: true });
    t.match(w.memberEmail, /^owner-.*@example\.com$/, 'email from the member record');
    t.match(w.addedBy, /^key_/, 'added by the API key');
    t.match(w.addedAt, ISO);
    t.same(Object.keys(w).sort(), ['addedAt', 'addedBy', 'id', 'memberEmail', 'memberId', 'memberName', 'notifyOnComment', 'notifyOnStatusChange', 'ticketId']);
    t.same((await owner.live('GET', url)).body, [w], 'the list is a bare array');

    const patched = await owner.live('PATCH', `${url}/${owner.ownerId}`, { notifyOnComment: false });
    t.equal(patched.status, 200);
    t.same(patched.body, { ...w, notifyOnComment: false });
    const both = await owner.live('PATCH', `${url}/${owner.ownerId}`, { notifyOnComment: true, notifyOnStatusChange: false });
    t.same(both.body, { ...w, notifyOnStatusChange: false });

    const removed = await owner.live('DELETE', `${url}/${owner.ownerId}`);
    t.equal(removed.status, 200);
    t.same(removed.body, both.body, 'returns the removed watcher');
    t.same((await owner.live('GET', url)).body, []);
    assertNotFound(t, await owner.live('DELETE', `${url}/${owner.ownerId}`), 'not watching any more');
    assertNotFound(t, await owner.live('PATCH', `${url}/${owner.ownerId}`, { notifyOnComment: true }), 'PATCH of a non-watcher');

    t.same(await events(tk.id), ['ticket.created', 'watcher.added', 'watcher.updated', 'watcher.updated', 'watcher.removed']);
    const updated = await db('auditLog').where({ ticketId: tk.id, event: 'watcher.updated' }).orderBy('id').first();
    t.same(updated.changes, [{ field: 'notifyOnComment', from: true, to: false }]);
    t.equal(updated.entityId, w.id);
  });
}

t.test('given email, name and preferences are stored; adding an existing watcher returns it (200)', async (t) => {
  const { owner, base } = await setup();
  const agent = await addMember(owner.accountId, null, 'agent@example.com');
  const tk = await makeTicket(owner.live, base, { title: 'x' });
  const url = `${base}/tickets/${tk.id}/watchers`;

  const first = await owner.live('POST', url, { memberId: agent, memberEmail: ' Agent.Alias@Example.com ', memberName: 'Alias', notifyOnComment: false });
  t.equal(first.status, 201);
  t.match(first.body, { memberId: agent, memberEmail: 'agent.alias@example.com', memberName: 'Alias', notifyOnComment: false, notifyOnStatusChange: true });
  const defaults = await owner.live('POST', url, { memberId: owner.ownerId, memberName: null });
  t.equal(defaults.body.memberName, null, 'an explicit null name is kept');

  const again = await owner.live('POST', url, { memberId: agent, notifyOnComment: true, memberName: 'Other' });
  t.equal(again.status, 200, 'already watching: 200');
  t.same(again.body, first.body, 'the existing watcher, unchanged');
  t.equal((await owner.live('GET', url)).body.length, 2);
  t.same(await events(tk.id), ['ticket.created', 'watcher.added', 'watcher.added'], 'no entry for the repeat');

  const noop = await owner.live('PATCH', `${url}/${agent}`, { notifyOnComment: false });
  t.same(noop.body, first.body, 'a PATCH that changes nothing');
  t.equal((await events(tk.id)).length, 3, 'writes no entry');

  const member = await addMember(owner.accountId, 'Name Default', 'nd@example.com');
  t.match((await owner.live('POST', url, { memberId: member })).body, { memberName: 'Name Default', memberEmail: 'nd@example.com' });
});

t.test('concurrent adds of the same member make one watcher', async (t) => {
  const { owner, base } = await setup();
  const tk = await makeTicket(owner.live, base, { title: 'x' });
  const url = `${base}/tickets/${tk.id}/watchers`;
  const results = await Promise.all(Array.from({ length: 10 }, () => owner.live('POST', url, { memberId: owner.ownerId })));
  t.same(results.map((r) => r.status).sort(), [200, 200, 200, 200, 200, 200, 200, 200, 200, 201]);
  t.equal(new Set(results.map((r) => r.body.id)).size, 1, 'everyone got the same watcher');
  t.equal((await owner.live('GET', url)).body.length, 1);
});

t.test('bad input is a 400: non-members, missing memberId, unknown fields, empty PATCH', async (t) => {
  const { owner, base } = await setup();
  const stranger = await setup();
  const tk = await makeTicket(owner.live, base, { title: 'x' });
  const url = `${base}/tickets/${tk.id}/watchers`;
  const cases: [string, unknown, string, string][] = [
    ['member of another account', { memberId: stranger.owner.ownerId }, 'invalid_member', 'memberId'],
    ['unknown member', { memberId: 'mem_nope' }, 'invalid_member', 'memberId'],
    ['no memberId', {}, 'validation_failed', 'memberId'],
    ['no body', undefined, 'validation_failed', 'memberId'],
    ['bad email', { memberId: owner.ownerId, memberEmail: 'nope' }, 'validation_failed', 'memberEmail'],
    ['unknown field', { memberId: owner.ownerId, role: 'x' }, 'validation_failed', 'role'],
    ['non-boolean preference', { memberId: owner.ownerId, notifyOnComment: 'yes' }, 'validation_failed', 'notifyOnComment'],
  ];
  for (const [label, body, code, field] of cases) {
    const res = await owner.live('POST', url, body);
    assertErrorShape(t, res, 400, code);
    t.ok(fieldsNamed(res).includes(field), `${label}: names ${field} (${JSON.stringify(fieldsNamed(res))})`);
  }
  t.equal((await owner.live('POST', url, { memberId: owner.ownerId })).status, 201);
  assertErrorShape(t, await owner.live('PATCH', `${url}/${owner.ownerId}`, {}), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('PATCH', `${url}/${owner.ownerId}`, { memberEmail: 'a@b.co' }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('PATCH', `${url}/${owner.ownerId}`, { notifyOnComment: 1 }), 400, 'validation_failed');
  t.same(await events(tk.id), ['ticket.created', 'watcher.added']);
});

t.test('every route: 401 without a key; 404 across account, mode, brand, and for deleted or unknown tickets', async (t) => {
  const { owner, base } = await setup();
  const tk = await makeTicket(owner.live, base, { title: 'x' });
  const url = `${base}/tickets/${tk.id}/watchers`;
  t.equal((await owner.live('POST', url, { memberId: owner.ownerId })).status, 201);
  const other = await makeBrand(owner.live, 'Other');
  const testBrand = await makeBrand(owner.test);
  const stranger = await setup();
  const requests = (path: string): [string, string, unknown?][] => [
    ['GET', path],
    ['POST', path, { memberId: owner.ownerId }],
    ['PATCH', `${path}/${owner.ownerId}`, { notifyOnComment: false }],
    ['DELETE', `${path}/${owner.ownerId}`],
  ];
  for (const [method, path, body] of requests(url)) {
    assertErrorShape(t, await anonymous(method, path, body), 401, 'missing_credentials');
    assertNotFound(t, await owner.live(method, path.replace(base, `/v1/brands/${other.id}`), body), `${method}: another brand`);
    assertNotFound(t, await stranger.owner.live(method, path, body), `${method}: another account (brand)`);
    assertNotFound(t, await stranger.owner.live(method, path.replace(base, stranger.base), body), `${method}: another account (own brand)`);
    assertNotFound(t, await owner.test(method, path, body), `${method}: the other mode`);
    assertNotFound(t, await owner.test(method, path.replace(base, `/v1/brands/${testBrand.id}`), body), `${method}: the other mode (own brand)`);
    assertNotFound(t, await owner.live(method, path.replace(tk.id, 'tkt_nope'), body), `${method}: unknown ticket`);
  }
  const still = (await owner.live('GET', url)).body;
  t.equal(still.length, 1, 'the watcher is untouched');
  t.equal(still[0].notifyOnComment, true);

  t.equal((await owner.live('DELETE', `${base}/tickets/${tk.id}`)).status, 200);
  for (const [method, path, body] of requests(url)) assertNotFound(t, await owner.live(method, path, body), `${method}: deleted ticket`);

  // Members belong to the account, not to a mode: they may watch test-mode tickets too.
  const testTicket = await makeTicket(owner.test, `/v1/brands/${testBrand.id}`, { title: 'test mode' });
  const inTest = await owner.test('POST', `/v1/brands/${testBrand.id}/tickets/${testTicket.id}/watchers`, { memberId: owner.ownerId });
  t.equal(inTest.status, 201);
  assertNotFound(t, await owner.live('GET', `/v1/brands/${testBrand.id}/tickets/${testTicket.id}/watchers`), 'and live keys cannot see them');
});

t.test('ticket create adds the watchers it is given, in its transaction', async (t) => {
  const { owner, brand, base } = await setup();
  const agent = await addMember(owner.accountId, 'Agent', 'agent@example.com');
  const tk = await makeTicket(owner.live, base, {
    title: 'With watchers',
    watchers: [{ memberId: owner.ownerId, memberEmail: 'owner.alias@example.com' }, { memberId: agent, memberName: 'Agent A' }, { memberId: agent }],
  });
  const list = (await owner.live('GET', `${base}/tickets/${tk.id}/watchers`)).body;
  t.same(
    list.map((w: { memberId: string; memberEmail: string; memberName: string | null }) => [w.memberId, w.memberEmail, w.memberName]),
    [
      [owner.ownerId, 'owner.alias@example.com', 'Test Owner'],
      [agent, 'agent@example.com', 'Agent A'],
    ],
    'in the order given; a member named twice is added once',
  );
  t.same(await events(tk.id), ['ticket.created', 'watcher.added', 'watcher.added']);

  const stranger = await setup();
  const before = (await owner.live('GET', `/v1/brands/${brand.id}`)).body.nextTicketNumber;
  const bad = await owner.live('POST', `${base}/tickets`, { title: 'x', watchers: [{ memberId: agent }, { memberId: stranger.owner.ownerId }] });
  assertErrorShape(t, bad, 400, 'invalid_member');
  t.same(fieldsNamed(bad), ['watchers.1.memberId']);
  assertErrorShape(t, await owner.live('POST', `${base}/tickets`, { title: 'x', watchers: [{ email: 'x@example.com' }] }), 400, 'validation_failed');
  t.equal((await owner.live('GET', `/v1/brands/${brand.id}`)).body.nextTicketNumber, before, 'no ticket, no number used');
  t.equal(Number((await db('ticketWatchers').where({ brandId: brand.id }).count({ n: '*' }))[0]!.n), 2, 'no stray watcher rows');

  // The idempotent replay of a create with watchers answers with the first ticket and adds nobody.
  const key = { 'x-idempotency-key': 'with-watchers' };
  const once = await owner.live('POST', `${base}/tickets`, { title: 'once', watchers: [{ memberId: agent }] }, key);
  const twice = await owner.live('POST', `${base}/tickets`, { title: 'once', watchers: [{ memberId: agent }] }, key);
  t.same([once.status, twice.status], [201, 200]);
  t.equal((await owner.live('GET', `${base}/tickets/${once.body.id}/watchers`)).body.length, 1);
});

t.test('a removed member stops watching; a deleted brand takes its watchers', async (t) => {
  const { owner, brand, base } = await setup();
  const agent = await addMember(owner.accountId, 'Agent', 'agent@example.com');
  const tk = await makeTicket(owner.live, base, { title: 'x', watchers: [{ memberId: agent }, { memberId: owner.ownerId }] });
  await db('members').where({ id: agent }).delete();
  t.same(
    (await owner.live('GET', `${base}/tickets/${tk.id}/watchers`)).body.map((w: { memberId: string }) => w.memberId),
    [owner.ownerId],
  );
  t.equal((await owner.live('DELETE', `/v1/brands/${brand.id}?confirm=true`)).status, 200);
  t.equal(Number((await db('ticketWatchers').where({ brandId: brand.id }).count({ n: '*' }))[0]!.n), 0);
});

t.test('the watcher routes are in the OpenAPI document', async (t) => {
  const doc = (await anonymous('GET', '/v1/openapi.json')).body;
  for (const prefix of ['/v1/brands/{brandId}', '/v1/workspaces/{brandId}']) {
    const list = doc.paths[`${prefix}/tickets/{ticketId}/watchers`];
    const one = doc.paths[`${prefix}/tickets/{ticketId}/watchers/{memberId}`];
    t.ok(list?.get && list?.post, `${prefix}: GET and POST …/watchers`);
    t.ok(one?.patch && one?.delete, `${prefix}: PATCH and DELETE …/watchers/{memberId}`);
  }
});

t.test('the schema refuses a watcher of a ticket in another scope or a member of another account', async (t) => {
  const { owner, brand, base } = await setup();
  const stranger = await setup();
  const other = await makeBrand(owner.live, 'Other');
  const tk = await makeTicket(owner.live, base, { title: 'x' });
  const row = { id: newId('wch'), accountId: owner.accountId, livemode: true, brandId: brand.id, ticketId: tk.id, memberId: owner.ownerId, memberEmail: 'a@example.com' };
  const code = async (values: Record<string, unknown>) => {
    try {
      // The ticket key is deferred: the violation surfaces at commit.
      await db.transaction(async (trx) => {
        await trx('ticketWatchers').insert(values);
      });
      return 'ok';
    } catch (err) {
      return (err as { code?: string }).code;
    }
  };
  // On a cluster, a deferred key refusing at COMMIT is answered with Citus's own XX000 ("could not
  // commit transaction for shard …"); the row is refused all the same.
  const refusedAtCommit = onCitusCluster ? 'XX000' : '23503';
  t.equal(await code({ ...row, brandId: other.id }), refusedAtCommit, 'ticket of another brand');
  t.equal(await code({ ...row, livemode: false }), refusedAtCommit, 'ticket of the other mode');
  t.equal(await code({ ...row, memberId: stranger.owner.ownerId }), '23503', 'member of another account');
  t.equal(await code(row), 'ok', 'the right scope is fine');
  t.equal(await code({ ...row, id: newId('wch') }), '23505', 'one watcher per ticket and member');
});
