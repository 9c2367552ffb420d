import t from 'tap';
import { assertErrorShape, assertNotFound, client, makeBrand, makeTicket, type Reply, servicesOf, type Signup, signup, testApp } from '../helpers/app.js';
import { sessionToken } from '../helpers/sign-in.js';

// Every test signs up its own accounts: lift the per-hour signup limit for this file.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const anonymous = client(app);

type Call = Signup['live'];
const COMMENT_ID = /^cmt_[0-9a-z]{26}$/;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

async function setup() {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}`;
  const ticket = await makeTicket(owner.live, base, { title: 'Printer on fire', body: 'Flames everywhere.' });
  return { owner, brand, base, ticket, comments: `${base}/tickets/${ticket.id}/comments` };
}

async function comment(call: Call, path: string, body: Record<string, unknown>) {
  const res = await call('POST', path, body);
  if (res.status !== 201) throw new Error(`comment create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

const fieldsNamed = (res: Reply): string[] => (res.body?.errors ?? []).map((e: { field: string }) => e.field);
const ids = (list: { id: string }[]) => list.map((c) => c.id);

async function ticketOf(call: Call, base: string, ticketId: string) {
  return (await call('GET', `${base}/tickets/${ticketId}`)).body;
}

async function commentRows(ticketId: string): Promise<number> {
  const row = (await db('comments').where({ ticketId }).count({ n: '*' }).first()) as { n: string };
  return Number(row.n);
}

async function auditEvents(ticketId: string): Promise<{ event: string; entityId: string; changes: unknown[]; metadata: Record<string, unknown> }[]> {
  return db('auditLog').where({ ticketId }).orderBy('id').select('event', 'entityId', 'changes', 'metadata');
}

for (const prefix of ['/v1/brands', '/v1/workspaces'] as const) {
  t.test(`${prefix}: create is 201 with the full comment; list, get (both paths) read it; the ticket counts it`, async (t) => {
    const { owner, brand, ticket } = await setup();
    const base = `${prefix}/${prefix === '/v1/workspaces' ? `ws_${brand.id.slice(3)}` : brand.id}`;
    const res = await owner.live('POST', `${base}/tickets/${ticket.id}/comments`, {
      body: 'Have you tried turning it off and on again?',
      authorId: 'mem_someone',
      authorName: 'Ann Agent',
      authorType: 'AGENT',
      links: [{ url: 'https://kb.example.com/42', title: 'KB 42' }],
      metadata: { isInternal: false, mentions: [{ memberId: 'mem_x', displayName: 'X', email: 'x@example.com' }], extra: { n: 1 } },
      source: 'email',
      sourceId: 'msg-7',
      sourceData: { inbox: 'support' },
      connectionId: 'conn_1',
      cc: [' Boss@Example.COM ', 'boss@example.com', 'other@example.org'],
    });
    t.equal(res.status, 201);
    const c = res.body;
    t.match(c.id, COMMENT_ID);
    t.match(c, {
      object: 'comment',
      ticketId: ticket.id,
      brandId: brand.id,
      body: 'Have you tried turning it off and on again?',
      authorId: 'mem_someone',
      authorName: 'Ann Agent',
      authorType: 'AGENT',
      parentId: null,
      isInternal: false,
      source: 'email',
      sourceId: 'msg-7',
      connectionId: 'conn_1',
      deletedAt: null,
    });
    t.same(c.links, [{ url: 'https://kb.example.com/42', title: 'KB 42' }]);
    t.same(
      c.metadata,
      { authorName: 'Ann Agent', isInternal: false, mentions: [{ memberId: 'mem_x', displayName: 'X', email: 'x@example.com' }], extra: { n: 1 } },
      'metadata as given, with the author name the dashboard reads there',
    );
    t.same(c.sourceData, { inbox: 'support' });
    t.same(c.cc, ['boss@example.com', 'other@example.org'], 'cc trimmed, lower-cased, deduplicated');
    t.same(c.replies, []);
    t.match(c.createdAt, ISO);
    t.match(c.updatedAt, ISO);

    const listed = await owner.live('GET', `${base}/tickets/${ticket.id}/comments`);
    t.equal(listed.status, 200);
    t.same(listed.body, [c], 'a bare array with the comment, without the ticket body');
    const long = await owner.live('GET', `${base}/tickets/${ticket.id}/comments/${c.id}`);
    t.equal(long.status, 200);
    t.same(long.body, c);
    const short = await owner.live('GET', `${base}/comments/${c.id}`);
    t.equal(short.status, 200);
    t.same(short.body, c, "the SDK's short path");

    const after = await ticketOf(owner.live, base, ticket.id);
    t.equal(after.commentCount, 1);
    t.ok(after.updatedAt > ticket.updatedAt, "the ticket's updatedAt moved");
  });
}

t.test('defaults; authorName from metadata; isInternal from metadata', async (t) => {
  const { owner, comments } = await setup();
  const plain = await comment(owner.live, comments, { body: 'hello' });
  t.match(plain, { authorType: 'AGENT', authorId: null, authorName: null, parentId: null, isInternal: false, source: 'api', sourceId: null, sourceData: null, connectionId: null });
  t.same(plain.links, []);
  t.same(plain.metadata, { authorName: null }, 'no author name: null in metadata too');
  t.same(plain.cc, []);

  const note = await comment(owner.live, comments, { body: 'internal note', authorType: 'AGENT', metadata: { isInternal: true, authorName: 'Dana Desk' } });
  t.equal(note.isInternal, true);
  t.equal(note.authorName, 'Dana Desk', 'authorName falls back to metadata.authorName');
  const both = await comment(owner.live, comments, { body: 'x', authorName: 'Top', metadata: { authorName: 'Meta' } });
  t.equal(both.authorName, 'Top', 'the top-level authorName wins');
  const customer = await comment(owner.live, comments, { body: 'from the customer', authorType: 'CUSTOMER', authorId: 'cus_1' });
  t.match(customer, { authorType: 'CUSTOMER', authorId: 'cus_1' });
  const row = await db('comments').where({ id: note.id }).first();
  t.equal(row.isInternal, true, 'is_internal is a real column');
});

t.test('bad input is a 400 naming the field, and creates nothing', async (t) => {
  const { owner, base, ticket, comments } = await setup();
  const otherTicket = await makeTicket(owner.live, base);
  const foreign = await comment(owner.live, `${base}/tickets/${otherTicket.id}/comments`, { body: 'elsewhere' });
  const gone = await comment(owner.live, comments, { body: 'soon deleted' });
  t.equal((await owner.live('DELETE', `${base}/comments/${gone.id}`)).status, 200);
  const before = await commentRows(ticket.id);
  const ticketBefore = await ticketOf(owner.live, base, ticket.id);

  const cases: [string, Record<string, unknown> | undefined, string, string?][] = [
    ['no body at all', undefined, 'body'],
    ['missing body', { authorName: 'x' }, 'body'],
    ['empty body', { body: '' }, 'body'],
    ['blank body', { body: ' \n\t ' }, 'body'],
    ['huge body', { body: 'x'.repeat(100_001) }, 'body'],
    ['body not a string', { body: 42 }, 'body'],
    ['bad cc email', { body: 'x', cc: ['ok@example.com', 'not-an-email'] }, 'cc'],
    ['cc not an array', { body: 'x', cc: 'a@example.com' }, 'cc'],
    ['unknown setStatus', { body: 'x', setStatus: 'nope' }, 'setStatus', 'invalid_status'],
    ['parentId of another ticket', { body: 'x', parentId: foreign.id }, 'parentId', 'invalid_parent'],
    ['unknown parentId', { body: 'x', parentId: 'cmt_nope' }, 'parentId', 'invalid_parent'],
    ['deleted parentId', { body: 'x', parentId: gone.id }, 'parentId', 'invalid_parent'],
    ['unknown authorType', { body: 'x', authorType: 'ROBOT' }, 'authorType'],
    ['unknown source', { body: 'x', source: 'fax' }, 'source'],
    ['isInternal not a boolean', { body: 'x', metadata: { isInternal: 'yes' } }, 'metadata.isInternal'],
    ['unknown field', { body: 'x', colour: 'red' }, 'colour'],
    ['link without url', { body: 'x', links: [{ title: 'a' }] }, 'links'],
  ];
  for (const [label, body, field, code] of cases) {
    const res = await owner.live('POST', comments, body);
    t.equal(res.status, 400, `${label}: 400`);
    if (code) t.equal(res.body.code, code, `${label}: ${code}`);
    t.ok(
      fieldsNamed(res).some((f) => f.includes(field)),
      `${label}: names ${field} (${JSON.stringify(fieldsNamed(res))})`,
    );
  }
  assertErrorShape(t, await owner.live('POST', comments, { body: 'x', setStatus: 'nope' }), 400, 'invalid_status');
  assertErrorShape(t, await owner.live('POST', comments, { body: 'x', parentId: foreign.id }), 400, 'invalid_parent');
  assertErrorShape(t, await owner.live('POST', comments, { body: '' }), 400, 'validation_failed');
  t.equal(await commentRows(ticket.id), before, 'nothing was created');
  const ticketAfter = await ticketOf(owner.live, base, ticket.id);
  t.equal(ticketAfter.commentCount, ticketBefore.commentCount, 'commentCount unchanged');
  t.equal(ticketAfter.updatedAt, ticketBefore.updatedAt, 'updatedAt unchanged');
  t.equal(ticketAfter.status, 'open');
});

t.test('401 without or with a bad key on every route', async (t) => {
  const { owner, base, ticket, comments } = await setup();
  const c = await comment(owner.live, comments, { body: 'x' });
  const bad = client(app, 'sk_live_nope');
  const routes: [string, string, unknown?][] = [
    ['GET', comments],
    ['POST', comments, { body: 'x' }],
    ['GET', `${comments}/${c.id}`],
    ['PATCH', `${comments}/${c.id}`, { body: 'y' }],
    ['DELETE', `${comments}/${c.id}`],
    ['GET', `${base}/comments/${c.id}`],
    ['PATCH', `${base}/comments/${c.id}`, { body: 'y' }],
    ['DELETE', `${base}/comments/${c.id}`],
  ];
  for (const [method, url, body] of routes) {
    assertErrorShape(t, await anonymous(method, url, body), 401, 'missing_credentials');
    assertErrorShape(t, await bad(method, url, body), 401, 'invalid_api_key');
  }
  t.equal((await ticketOf(owner.live, base, ticket.id)).commentCount, 1, 'nothing changed');
  t.equal((await owner.live('GET', `${base}/comments/${c.id}`)).body.body, 'x');
});

t.test('another account, the other mode, another brand or ticket: 404 on every route, nothing changes', async (t) => {
  const { owner, brand, base, ticket, comments } = await setup();
  const c = await comment(owner.live, comments, { body: 'mine' });
  const otherTicket = await makeTicket(owner.live, base);
  const otherBrand = await makeBrand(owner.live, 'Other');
  const testBrand = await makeBrand(owner.test);
  const stranger = await setup();

  const attempts: [string, Call, string][] = [
    ['another account (my brand)', stranger.owner.live, base],
    ['another account (own brand)', stranger.owner.live, stranger.base],
    ['the test mode (my brand)', owner.test, base],
    ['the test mode (own brand)', owner.test, `/v1/brands/${testBrand.id}`],
    ['another brand of mine', owner.live, `/v1/brands/${otherBrand.id}`],
  ];
  for (const [label, call, b] of attempts) {
    assertNotFound(t, await call('GET', `${b}/tickets/${ticket.id}/comments`), `${label}: list`);
    assertNotFound(t, await call('POST', `${b}/tickets/${ticket.id}/comments`, { body: 'x' }), `${label}: create`);
    for (const path of [`${b}/tickets/${ticket.id}/comments/${c.id}`, `${b}/comments/${c.id}`]) {
      assertNotFound(t, await call('GET', path), `${label}: get ${path}`);
      assertNotFound(t, await call('PATCH', path, { body: 'hijacked' }), `${label}: patch ${path}`);
      assertNotFound(t, await call('DELETE', path), `${label}: delete ${path}`);
    }
  }
  const wrongTicket = `${base}/tickets/${otherTicket.id}/comments/${c.id}`;
  assertNotFound(t, await owner.live('GET', wrongTicket), "the comment under another ticket's path");
  assertNotFound(t, await owner.live('PATCH', wrongTicket, { body: 'x' }), 'patch under another ticket');
  assertNotFound(t, await owner.live('DELETE', wrongTicket), 'delete under another ticket');
  assertNotFound(t, await owner.live('GET', `${base}/tickets/tkt_nope/comments`), 'unknown ticket');
  assertNotFound(t, await owner.live('POST', `${base}/tickets/tkt_nope/comments`, { body: 'x' }), 'unknown ticket: create');
  assertNotFound(t, await owner.live('GET', `${base}/comments/cmt_nope`), 'unknown comment');

  const got = await owner.live('GET', `${base}/comments/${c.id}`);
  t.equal(got.body.body, 'mine', 'untouched');
  t.equal(got.body.deletedAt, null);
  t.equal((await ticketOf(owner.live, base, ticket.id)).commentCount, 1);
  t.equal(brand.id, got.body.brandId);
  t.equal(await commentRows(stranger.ticket.id), 0);
});

t.test('a deleted ticket: its comments are 404 and new ones too', async (t) => {
  const { owner, base, ticket, comments } = await setup();
  const c = await comment(owner.live, comments, { body: 'x' });
  t.equal((await owner.live('DELETE', `${base}/tickets/${ticket.id}`)).status, 200);
  assertNotFound(t, await owner.live('GET', comments), 'list');
  assertNotFound(t, await owner.live('POST', comments, { body: 'y' }), 'create');
  assertNotFound(t, await owner.live('GET', `${base}/comments/${c.id}`), 'get');
  assertNotFound(t, await owner.live('PATCH', `${base}/comments/${c.id}`, { body: 'z' }), 'patch');
  assertNotFound(t, await owner.live('DELETE', `${base}/comments/${c.id}`), 'delete');
  t.equal(await commentRows(ticket.id), 1);
});

t.test('threads: oldest first, replies (to replies too) under their top-level comment; deleted ones left out', async (t) => {
  const { owner, base, comments } = await setup();
  const a = await comment(owner.live, comments, { body: 'A' });
  const b = await comment(owner.live, comments, { body: 'B, reply to A', parentId: a.id });
  const c = await comment(owner.live, comments, { body: 'C' });
  const d = await comment(owner.live, comments, { body: 'D, reply to B', parentId: b.id });
  const e = await comment(owner.live, comments, { body: 'E, reply to A', parentId: a.id });
  t.equal(b.parentId, a.id);

  let list = (await owner.live('GET', comments)).body;
  t.same(ids(list), [a.id, c.id], 'top level, oldest first');
  t.same(ids(list[0].replies), [b.id, d.id, e.id], "A's thread, oldest first");
  t.equal(list[0].replies[1].parentId, b.id, 'a reply to a reply keeps its parentId');
  t.ok(
    list[0].replies.every((r: { replies: unknown[] }) => r.replies.length === 0),
    'threads are one level deep',
  );
  t.same(list[1].replies, []);
  t.same(ids((await owner.live('GET', `${base}/comments/${a.id}`)).body.replies), [b.id, d.id, e.id], 'GET of a top-level comment has its thread');
  t.same((await owner.live('GET', `${base}/comments/${b.id}`)).body.replies, [], 'GET of a reply has none');

  // A reply whose parent was deleted starts its own thread at top level, in its chronological place.
  t.equal((await owner.live('DELETE', `${base}/comments/${b.id}`)).status, 200);
  list = (await owner.live('GET', comments)).body;
  t.same(ids(list), [a.id, c.id, d.id], 'D (its parent B deleted) is top-level, after C');
  t.same(ids(list[0].replies), [e.id]);
  t.equal(list[2].parentId, b.id, 'D still names its parent');
  t.equal((await owner.live('DELETE', `${base}/comments/${a.id}`)).status, 200);
  list = (await owner.live('GET', comments)).body;
  t.same(ids(list), [c.id, d.id, e.id], 'A deleted: E is top-level');
  t.same(
    list.flatMap((x: { replies: unknown[] }) => x.replies),
    [],
  );
  t.equal((await ticketOf(owner.live, base, a.ticketId)).commentCount, 3, 'commentCount counts live comments, replies included');
});

t.test('to a session (the dashboard) the list is every comment, replies in their place, so the last one is the newest', async (t) => {
  const email = `flat-${process.pid}@example.com`;
  const owner = await signup(app, email);
  const dashboard = client(app, await sessionToken(app, servicesOf(db), owner.accountId, email));
  const base = `/v1/brands/${(await makeBrand(owner.live)).id}`;
  const comments = `${base}/tickets/${(await makeTicket(owner.live, base)).id}/comments`;
  const a = await comment(owner.live, comments, { body: 'A' });
  const c = await comment(dashboard, comments, { body: 'C, from the dashboard' });
  const reply = await comment(owner.live, comments, { body: 'Reply to A, through the SDK', parentId: a.id });

  const flat = (await dashboard('GET', comments)).body;
  t.same(ids(flat), [a.id, c.id, reply.id], 'oldest first, the reply in its place');
  t.equal(flat[2].parentId, a.id, 'the reply names its parent');
  t.ok(
    flat.every((x: { replies: unknown[] }) => x.replies.length === 0),
    'no threads: nothing is listed twice',
  );
  t.same(ids((await owner.live('GET', comments)).body), [a.id, c.id], 'an API key still reads threads');

  const stranger = await signup(app);
  const elsewhere = `/v1/brands/${(await makeBrand(stranger.live)).id}`;
  assertNotFound(t, await dashboard('GET', `${elsewhere}/tickets/${reply.ticketId}/comments`), "another account's brand");
  assertNotFound(t, await dashboard('GET', `${base}/tickets/tkt_00000000000000000000000000/comments`), 'an unknown ticket');
});

t.test('setStatus changes the ticket status with the comment, atomically, with its audit entry', async (t) => {
  const { owner, base, ticket, comments } = await setup();
  const c = await comment(owner.live, comments, { body: 'Waiting for you', setStatus: 'pending' });
  let tk = await ticketOf(owner.live, base, ticket.id);
  t.equal(tk.status, 'pending');
  t.equal(tk.commentCount, 1);
  let events = await auditEvents(ticket.id);
  t.same(
    events.map((e) => e.event),
    ['ticket.created', 'comment.created', 'ticket.updated'],
  );
  t.match(events[1], { entityId: c.id, metadata: { ticketNumber: ticket.ticketNumber, isInternal: false } });
  t.same(events[2]!.changes, [{ field: 'status', from: 'open', to: 'pending' }]);

  await comment(owner.live, comments, { body: 'Still waiting', setStatus: 'pending' });
  events = await auditEvents(ticket.id);
  t.same(events.map((e) => e.event).slice(3), ['comment.created'], 'the same status again: no ticket.updated');

  t.equal((await owner.live('POST', `${base}/statuses`, { key: 'on_hold', name: 'On hold', color: '#123456' })).status, 201);
  await comment(owner.live, comments, { body: 'Parking it', setStatus: 'on_hold', metadata: { isInternal: true } });
  tk = await ticketOf(owner.live, base, ticket.id);
  t.equal(tk.status, 'on_hold', 'any status key of the brand');

  // The ticket is written before the comment is inserted; a failing insert (PostgreSQL refuses NUL
  // in text) must roll the status and the count back with it.
  const failing = await owner.live('POST', comments, { body: 'bad \u0000 byte', setStatus: 'resolved' });
  t.equal(failing.status, 400, 'a client error, not a 500');
  const after = await ticketOf(owner.live, base, ticket.id);
  t.equal(after.status, 'on_hold', 'status unchanged');
  t.equal(after.commentCount, 3, 'count unchanged');
  t.equal(after.updatedAt, tk.updatedAt, 'updatedAt unchanged');
  t.equal(await commentRows(ticket.id), 3);
  t.equal((await auditEvents(ticket.id)).length, events.length + 2, 'no entry from the failed request');
});

t.test('every comment carries its author name at the top (the SDK) and in metadata (the dashboard), unless its metadata names someone', async (t) => {
  const { owner, base, comments } = await setup();
  const named = await comment(owner.live, comments, { body: 'On it', authorName: 'Ann Agent', metadata: { isInternal: false } });
  t.equal(named.authorName, 'Ann Agent', 'SDK: authorName');
  t.same(named.metadata, { authorName: 'Ann Agent', isInternal: false }, "dashboard: metadata.authorName, beside the comment's own keys");
  const own = await comment(owner.live, comments, { body: 'Signed', authorName: 'Ann Agent', metadata: { authorName: 'Support team' } });
  t.equal(own.authorName, 'Ann Agent');
  t.equal(own.metadata.authorName, 'Support team', "the comment's own metadata.authorName stays");

  const [listed] = (await owner.live('GET', comments)).body as { id: string; metadata: Record<string, unknown> }[];
  t.equal(listed!.metadata.authorName, 'Ann Agent', 'the list carries it');
  t.equal((await owner.live('GET', `${base}/comments/${named.id}`)).body.metadata.authorName, 'Ann Agent', 'a single read carries it');
  const edited = await owner.live('PATCH', `${base}/comments/${named.id}`, { metadata: { pinned: true } });
  t.same(edited.body.metadata, { authorName: 'Ann Agent', pinned: true }, 'metadata replaced on PATCH still carries the name');
  t.same((await owner.live('DELETE', `${base}/comments/${named.id}`)).body.metadata.authorName, 'Ann Agent', 'so does the deleted comment DELETE returns');
  t.same((await db('comments').where({ id: named.id }).first('metadata')).metadata, { pinned: true }, 'stored metadata is left as sent: the name is added when read');
});

t.test('PATCH changes body, links, metadata; an internal note stays internal unless told otherwise', async (t) => {
  const { owner, base, ticket, comments } = await setup();
  const c = await comment(owner.live, comments, { body: 'first', metadata: { isInternal: true, tag: 1 } });
  const short = `${base}/comments/${c.id}`;

  const edited = await owner.live('PATCH', short, { body: 'second' });
  t.equal(edited.status, 200);
  t.equal(edited.body.body, 'second');
  t.ok(edited.body.updatedAt > c.updatedAt, 'updatedAt moved');
  t.equal(edited.body.createdAt, c.createdAt);

  const same = await owner.live('PATCH', short, { body: 'second' });
  t.equal(same.body.updatedAt, edited.body.updatedAt, 'no change: updatedAt stays');

  const meta = await owner.live('PATCH', `${comments}/${c.id}`, { metadata: { tag: 2 }, links: [{ url: 'https://x.example' }] });
  t.equal(meta.status, 200, 'the long path works too');
  t.same(meta.body.metadata, { authorName: null, tag: 2, isInternal: true }, 'metadata replaced; isInternal carried over');
  t.equal(meta.body.isInternal, true);
  t.same(meta.body.links, [{ url: 'https://x.example' }]);
  const published = await owner.live('PATCH', short, { metadata: { isInternal: false } });
  t.equal(published.body.isInternal, false, 'isInternal: false publishes it');
  t.equal((await db('comments').where({ id: c.id }).first()).isInternal, false);

  const events = (await auditEvents(ticket.id)).filter((e) => e.event === 'comment.updated');
  t.equal(events.length, 3, 'one entry per real change');
  t.same(events[0]!.changes, [{ field: 'body', from: 'first', to: 'second' }]);
  t.same(
    events[1]!.changes.map((ch) => (ch as { field: string }).field),
    ['links', 'metadata'],
  );

  for (const [label, body, field] of [
    ['empty body object', {}, ''],
    ['blank body', { body: '  ' }, 'body'],
    ['huge body', { body: 'x'.repeat(100_001) }, 'body'],
    ['authorType is not editable', { authorType: 'SYSTEM' }, 'authorType'],
    ['parentId is not editable', { parentId: null }, 'parentId'],
    ['isInternal not a boolean', { metadata: { isInternal: 1 } }, 'metadata.isInternal'],
  ] as [string, Record<string, unknown>, string][]) {
    const res = await owner.live('PATCH', short, body);
    t.equal(res.status, 400, `${label}: 400`);
    if (field)
      t.ok(
        fieldsNamed(res).some((f) => f.includes(field)),
        `${label}: names ${field}`,
      );
  }
  assertErrorShape(t, await owner.live('PATCH', `${comments}/${c.id}`, { body: '  ' }), 400, 'validation_failed');
  t.equal((await owner.live('GET', short)).body.body, 'second');
});

t.test('DELETE: soft delete returning the comment, commentCount drops, twice is 404', async (t) => {
  const { owner, base, ticket, comments } = await setup();
  const a = await comment(owner.live, comments, { body: 'a' });
  const b = await comment(owner.live, comments, { body: 'b' });
  const res = await owner.live('DELETE', `${comments}/${a.id}`);
  t.equal(res.status, 200);
  t.equal(res.body.id, a.id);
  t.match(res.body.deletedAt, ISO);
  t.equal(res.body.body, 'a');
  const tk = await ticketOf(owner.live, base, ticket.id);
  t.equal(tk.commentCount, 1);
  assertNotFound(t, await owner.live('DELETE', `${comments}/${a.id}`), 'deleting twice');
  assertNotFound(t, await owner.live('DELETE', `${base}/comments/${a.id}`), 'deleting twice (short path)');
  assertNotFound(t, await owner.live('GET', `${base}/comments/${a.id}`), 'a deleted comment');
  assertNotFound(t, await owner.live('PATCH', `${base}/comments/${a.id}`, { body: 'x' }), 'editing a deleted comment');
  t.same(ids((await owner.live('GET', comments)).body), [b.id]);
  t.equal((await ticketOf(owner.live, base, ticket.id)).commentCount, 1, 'the second delete changed nothing');
  const events = await auditEvents(ticket.id);
  t.match(
    events.filter((e) => e.event === 'comment.deleted'),
    [{ entityId: a.id, metadata: { ticketNumber: ticket.ticketNumber, isInternal: false } }],
  );
});

t.test('idempotency: replay is 200 with the first comment, another body 409, keys shared with tickets never collide', async (t) => {
  const { owner, brand, base, ticket, comments } = await setup();
  const key = { 'x-idempotency-key': 'reply-1' };
  const created = await owner.live('POST', comments, { body: 'Once', metadata: { a: 1, b: 2 } }, key);
  t.equal(created.status, 201);
  const replay = await owner.live('POST', comments, { metadata: { b: 2, a: 1 }, body: 'Once' }, key);
  t.equal(replay.status, 200);
  t.same(replay.body, created.body, 'the first comment');
  const viaWorkspace = await owner.live('POST', `/v1/workspaces/ws_${brand.id.slice(3)}/tickets/${ticket.id}/comments`, { body: 'Once', metadata: { a: 1, b: 2 } }, key);
  t.equal(viaWorkspace.status, 200, 'the workspace spelling is the same request');
  t.equal(await commentRows(ticket.id), 1);
  t.equal((await ticketOf(owner.live, base, ticket.id)).commentCount, 1, 'a replay does not count');

  assertErrorShape(t, await owner.live('POST', comments, { body: 'Different' }, key), 409, 'idempotency_key_reused');
  const other = await makeTicket(owner.live, base);
  assertErrorShape(t, await owner.live('POST', `${base}/tickets/${other.id}/comments`, { body: 'Once', metadata: { a: 1, b: 2 } }, key), 409, 'idempotency_key_reused');
  assertErrorShape(t, await owner.live('POST', `${base}/tickets`, { title: 'Once' }, key), 409, 'idempotency_key_reused');
  const ticketKey = { 'x-idempotency-key': 'ticket-key' };
  t.equal((await owner.live('POST', `${base}/tickets`, { title: 'T' }, ticketKey)).status, 201);
  assertErrorShape(t, await owner.live('POST', comments, { body: 'T' }, ticketKey), 409, 'idempotency_key_reused');

  const failing = await owner.live('POST', comments, { body: 'x', setStatus: 'nope' }, { 'x-idempotency-key': 'failing' });
  t.equal(failing.status, 400);
  t.equal((await owner.live('POST', comments, { body: 'x' }, { 'x-idempotency-key': 'failing' })).status, 201, 'a failed request does not use up its key');
  t.equal((await owner.live('POST', comments, { body: 'x' }, { 'x-idempotency-key': '' })).status, 400, 'empty key');

  t.equal((await owner.live('DELETE', `${base}/comments/${created.body.id}`)).status, 200);
  const afterDelete = await owner.live('POST', comments, { body: 'Once', metadata: { a: 1, b: 2 } }, key);
  t.equal(afterDelete.status, 200, 'a replay after a delete answers with the comment as it is now');
  t.ok(afterDelete.body.deletedAt);
});

t.test('idempotency under concurrency: 50 identical requests create exactly one comment', async (t) => {
  const { owner, base, ticket, comments } = await setup();
  const results = await Promise.all(Array.from({ length: 50 }, () => owner.live('POST', comments, { body: 'Only once', setStatus: 'pending' }, { 'x-idempotency-key': 'race' })));
  const statuses = results.map((r) => r.status);
  t.equal(statuses.filter((s) => s === 201).length, 1, 'one 201');
  t.equal(statuses.filter((s) => s === 200).length, 49, '49 replays');
  t.equal(new Set(results.map((r) => r.body.id)).size, 1, 'every caller got the same comment');
  t.equal(await commentRows(ticket.id), 1);
  const tk = await ticketOf(owner.live, base, ticket.id);
  t.equal(tk.commentCount, 1);
  t.equal(tk.status, 'pending');
});

t.test('commentCount stays exact under concurrency: 20 creates, then creates and deletes mixed', async (t) => {
  const { owner, base, ticket, comments } = await setup();
  const created = await Promise.all(Array.from({ length: 20 }, (_, i) => owner.live('POST', comments, { body: `c${i}` })));
  t.same(
    created.map((r) => r.status),
    Array(20).fill(201),
  );
  t.equal((await ticketOf(owner.live, base, ticket.id)).commentCount, 20);

  const toDelete = created.slice(0, 8).map((r) => r.body.id as string);
  const mixed = await Promise.all([
    ...Array.from({ length: 12 }, (_, i) => owner.live('POST', comments, { body: `m${i}`, parentId: created[10 + (i % 5)]!.body.id })),
    ...toDelete.map((id) => owner.live('DELETE', `${base}/comments/${id}`)),
    ...toDelete.slice(0, 4).map((id) => owner.live('DELETE', `${comments}/${id}`)), // deletes of the same comments race
  ]);
  t.equal(mixed.slice(0, 12).filter((r) => r.status === 201).length, 12);
  const deletes = mixed.slice(12);
  t.equal(deletes.filter((r) => r.status === 200).length, 8, 'each comment deleted once');
  t.equal(deletes.filter((r) => r.status === 404).length, 4, 'the racing second deletes are 404');
  const tk = await ticketOf(owner.live, base, ticket.id);
  t.equal(tk.commentCount, 24, '20 + 12 - 8');
  const live = Number(((await db('comments').where({ ticketId: ticket.id }).whereNull('deletedAt').count({ n: '*' }).first()) as { n: string }).n);
  t.equal(live, 24, 'equals the live rows');
  const list = (await owner.live('GET', comments)).body;
  t.equal(list.length + list.reduce((n: number, c: { replies: unknown[] }) => n + c.replies.length, 0), 24, 'and what the list shows');
});

t.test('the routes are in the OpenAPI document', async (t) => {
  const doc = (await anonymous('GET', '/v1/openapi.json')).body;
  for (const prefix of ['/v1/brands/{brandId}', '/v1/workspaces/{brandId}']) {
    t.ok(doc.paths[`${prefix}/tickets/{ticketId}/comments`]?.get, `${prefix}: list`);
    t.ok(doc.paths[`${prefix}/tickets/{ticketId}/comments`]?.post, `${prefix}: create`);
    for (const path of [`${prefix}/tickets/{ticketId}/comments/{commentId}`, `${prefix}/comments/{commentId}`]) {
      t.ok(doc.paths[path]?.get && doc.paths[path]?.patch && doc.paths[path]?.delete, `${path}: get, patch, delete`);
    }
  }
  const create = doc.paths['/v1/brands/{brandId}/tickets/{ticketId}/comments'].post;
  t.ok(
    create.parameters.some((p: { name: string; in: string }) => p.name === 'x-idempotency-key' && p.in === 'header'),
    'documents the idempotency header',
  );
});
