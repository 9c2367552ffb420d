import http from 'node:http';
import type net from 'node:net';
import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import { EXPORT_PAGE_SIZE, EXPORT_PAGE_SIZE_WITH_COMMENTS, exportTickets } from '../../server/flows/ticket-export.js';
import * as members from '../../server/domains/members/service.js';
import { assertErrorShape, assertNotFound, client, makeBrand, outsiders, servicesOf, signup, testApp } from '../helpers/app.js';
import { bulkTickets } from '../helpers/bulk-tickets.js';
import { addressOf, sessionToken } from '../helpers/sign-in.js';
import { until } from '../helpers/wait.js';

// One app for the file: every test makes its own account.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const services = servicesOf(db);

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;

/** The export's lines as parsed tickets (the body ends with a newline, and has no blank line). */
function lines(res: { text: string }): Any[] {
  const { text } = res;
  if (text === '') return [];
  if (!text.endsWith('\n')) throw new Error('the export does not end with a newline');
  return text
    .slice(0, -1)
    .split('\n')
    .map((l) => JSON.parse(l));
}

/** The raw text of a reply (client() parses a body that happens to be one JSON value). */
async function raw(key: string, url: string, method: 'GET' | 'HEAD' = 'GET') {
  const res = await app.inject({ method, url, headers: { authorization: `Bearer ${key}` } });
  return { status: res.statusCode, text: res.body, headers: res.headers, trailers: res.trailers };
}

async function world() {
  const email = addressOf('owner');
  const owner = await signup(app, email);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}`;
  const tag = (await owner.live('POST', `${base}/tags`, { name: 'printer' })).body;
  const live = tenantCtx(systemCtx(services), owner.accountId, true);
  const admin = await members.add(live, { email: addressOf('admin'), name: 'Ada Admin', role: 'admin' });
  const member = await members.add(live, { email: addressOf('member'), name: 'Mo Member', role: 'member' });
  const session = async (who: string) => {
    const token = await sessionToken(app, services, owner.accountId, who);
    return { token, call: client(app, token) };
  };
  return { owner, email, brand, base, tag, admin, member, asOwner: await session(email), asAdmin: await session(admin.email), asMember: await session(member.email) };
}

t.test('NDJSON: every ticket of the list, as the list shows it, oldest first, as a download', async (t) => {
  const w = await world();
  const made = [];
  for (const title of ['First', 'Second "quoted", with a comma\nand a new line', 'Third é 🎫 \u2028']) {
    made.push((await w.owner.live('POST', `${w.base}/tickets`, { title, customerEmail: 'ann@acme.example', tags: [w.tag.id], customFields: { plan: 'gold' } })).body);
  }
  const res = await raw(w.owner.liveKey, `${w.base}/tickets/export`);
  t.equal(res.status, 200);
  t.equal(res.headers['content-type'], 'application/x-ndjson; charset=utf-8');
  t.match(String(res.headers['content-disposition']), new RegExp(`^attachment; filename="tickets-${w.brand.id}-\\d{4}-\\d{2}-\\d{2}\\.ndjson"$`));
  t.equal(res.headers['cache-control'], 'no-store');
  t.equal(res.trailers['x-ticket-count'], '3', 'the trailer counts the tickets of a complete export');
  const list = (await w.owner.live('GET', `${w.base}/tickets?order=asc`)).body.data;
  const exported = lines(res);
  t.same(
    exported.map((x: Any) => x.id),
    made.map((x: Any) => x.id),
    'creation order',
  );
  t.strictSame(exported, list, 'each line is the ticket as the list shows it');
  t.equal(res.text.split('\n').length, 4, 'one line a ticket: a new line in a title is escaped');
  t.notOk('comments' in exported[0], 'no comments unless asked');

  const head = await raw(w.owner.liveKey, `${w.base}/tickets/export`, 'HEAD');
  t.equal(head.status, 200, 'HEAD answers');
  t.equal(head.text, '', 'HEAD: no body');
  t.equal(head.headers['content-type'], 'application/x-ndjson; charset=utf-8');
});

t.test('CSV: a fixed header, the flat fields, escaping, formulas defused', async (t) => {
  const w = await world();
  const tricky = (await w.owner.live('POST', `${w.base}/tickets`, { title: 'Printer "Laser", 3rd floor\nbroken é 🎫', body: null, priority: 'high', tags: [w.tag.id] })).body;
  const formula = (await w.owner.live('POST', `${w.base}/tickets`, { title: '=HYPERLINK("http://evil.example")', body: '-2+3', customFields: { a: [1, 'b'] } })).body;
  const res = await raw(w.owner.liveKey, `${w.base}/tickets/export?format=csv`);
  t.equal(res.status, 200);
  t.equal(res.headers['content-type'], 'text/csv; charset=utf-8');
  t.match(String(res.headers['content-disposition']), /filename="tickets-.*\.csv"$/);
  t.equal(res.trailers['x-ticket-count'], '2');
  const header =
    'id,ticketNumber,title,body,status,statusName,priority,assigneeId,createdBy,customerId,customerEmail,customerName,companyId,companyName,categoryId,categoryName,tagIds,tags,source,sourceId,commentCount,attachmentCount,isSpam,closeReason,dueAt,createdAt,updatedAt,mergedIntoId,customFields,links,metadata';
  t.ok(res.text.startsWith(`${header}\n`), 'the header');
  const rows = res.text.slice(header.length + 1);
  t.equal(
    rows,
    `${tricky.id},${tricky.ticketNumber},"Printer ""Laser"", 3rd floor\nbroken é 🎫",,open,Open,high,,,,,,,,,,${w.tag.id},printer,api,,0,0,false,,,${tricky.createdAt},${tricky.updatedAt},,,[],{}\n` +
      `${formula.id},${formula.ticketNumber},"'=HYPERLINK(""http://evil.example"")",'-2+3,open,Open,,,,,,,,,,,,,api,,0,0,false,,,${formula.createdAt},${formula.updatedAt},,"{""a"":[1,""b""]}",[],{}\n`,
    'every cell, quoted where it must be, formulas prefixed',
  );

  const other = await makeBrand(w.owner.live, 'Empty');
  const empty = await raw(w.owner.liveKey, `/v1/brands/${other.id}/tickets/export?format=csv`);
  t.equal(empty.text, `${header}\n`, 'a brand without tickets: the header alone');
  t.equal(empty.trailers['x-ticket-count'], '0');
});

t.test("the list's filters select the same tickets", async (t) => {
  const w = await world();
  const other = (await w.owner.live('POST', `${w.base}/tags`, { name: 'scanner' })).body;
  const specs = [
    { title: 'Open printer', tags: [w.tag.id], priority: 'high' },
    { title: 'Pending scanner', tags: [other.id], status: 'pending', assigneeId: w.owner.ownerId },
    { title: 'Closed printer jam', tags: [w.tag.id, other.id], status: 'closed', assigneeId: w.owner.ownerId },
    { title: 'Plain question', customerEmail: 'bea@example.com' },
  ];
  for (const spec of specs) await w.owner.live('POST', `${w.base}/tickets`, spec);
  const spam = (await w.owner.live('POST', `${w.base}/tickets`, { title: 'Buy now' })).body;
  await w.owner.live('PATCH', `${w.base}/tickets/${spam.id}`, { isSpam: true });
  const gone = (await w.owner.live('POST', `${w.base}/tickets`, { title: 'Deleted printer' })).body;
  await w.owner.live('DELETE', `${w.base}/tickets/${gone.id}`);

  for (const query of [
    '',
    'status=open',
    'status=active',
    `tagIds=${w.tag.id}`,
    `tagIds=${w.tag.id},${other.id}`,
    `assigneeId=${w.owner.ownerId}`,
    'assigneeId=unassigned',
    'priority=high',
    'search=printer',
    'customerEmail=bea@example.com',
    'isSpam=true',
  ]) {
    const listed = (await w.owner.live('GET', `${w.base}/tickets?order=asc&sort=createdAt&limit=100&${query}`)).body.data.map((x: Any) => x.id);
    const exported = lines(await raw(w.owner.liveKey, `${w.base}/tickets/export?${query}`)).map((x: Any) => x.id);
    t.same(exported, listed, `${query || 'no filter'}: the list's tickets (${listed.length})`);
  }
  const all = lines(await raw(w.owner.liveKey, `${w.base}/tickets/export`)).map((x: Any) => x.id);
  t.equal(all.length, 4, 'spam and deleted tickets are left out, as in the list');
  t.notOk(all.includes(gone.id));
});

t.test('comments when asked: every comment to a session, threads to an API key', async (t) => {
  const w = await world();
  const ticket = (await w.owner.live('POST', `${w.base}/tickets`, { title: 'Talkative' })).body;
  const quiet = (await w.owner.live('POST', `${w.base}/tickets`, { title: 'Quiet' })).body;
  const first = (
    await w.owner.live('POST', `${w.base}/tickets/${ticket.id}/comments`, {
      body: 'First, "quoted"\nline \u2028 é',
      metadata: { authorName: 'Named in metadata', nested: { list: [1, 2.5, 'x', null] } },
      links: [{ url: 'https://example.com/a', title: 'A' }],
    })
  ).body;
  const reply = (await w.owner.live('POST', `${w.base}/tickets/${ticket.id}/comments`, { body: 'A reply', parentId: first.id })).body;
  const replyToReply = (await w.owner.live('POST', `${w.base}/tickets/${ticket.id}/comments`, { body: 'A reply to the reply', parentId: reply.id })).body;
  const removed = (await w.owner.live('POST', `${w.base}/tickets/${ticket.id}/comments`, { body: 'Removed' })).body;
  const orphan = (await w.owner.live('POST', `${w.base}/tickets/${ticket.id}/comments`, { body: 'Its parent goes', parentId: removed.id })).body;
  await w.owner.live('DELETE', `${w.base}/tickets/${ticket.id}/comments/${removed.id}`);

  const byKey = lines(await raw(w.owner.liveKey, `${w.base}/tickets/export?comments=true`));
  t.same(
    byKey.map((x: Any) => x.id),
    [ticket.id, quiet.id],
  );
  t.strictSame(byKey[0].comments, (await w.owner.live('GET', `${w.base}/tickets/${ticket.id}/comments`)).body, "an API key: the comments as the SDK's list gives them (threads)");
  t.same(
    byKey[0].comments.map((c: Any) => [c.id, c.replies.map((r: Any) => r.id)]),
    [
      [first.id, [reply.id, replyToReply.id]],
      [orphan.id, []],
    ],
    'a thread holds the replies to replies; a reply whose parent was deleted starts one',
  );
  t.strictSame(byKey[1].comments, [], 'a ticket without comments: an empty list');
  t.equal(Object.keys(byKey[0]).at(-1), 'comments', 'comments come last, after every field of the ticket');

  const bySession = lines(await raw(w.asOwner.token, `${w.base}/tickets/export?comments=true`));
  t.strictSame(bySession[0].comments, (await w.asOwner.call('GET', `${w.base}/tickets/${ticket.id}/comments`)).body, "a session: the dashboard's list (every comment)");
  t.same(
    bySession[0].comments.map((c: Any) => c.id),
    [first.id, reply.id, replyToReply.id, orphan.id],
  );
  const { comments: _c, ...ticketBySession } = bySession[0];
  const { comments: _k, ...ticketByKey } = byKey[0];
  t.strictSame(ticketBySession, ticketByKey, 'the ticket itself is one shape for both');

  assertErrorShape(t, await w.owner.live('GET', `${w.base}/tickets/export?format=csv&comments=true`), 400, 'comments_need_ndjson');
});

t.test('watchers when asked: as the watcher list gives them, after the comments', async (t) => {
  const w = await world();
  const watched = (await w.owner.live('POST', `${w.base}/tickets`, { title: 'Watched' })).body;
  const unwatched = (await w.owner.live('POST', `${w.base}/tickets`, { title: 'Alone' })).body;
  for (const m of [w.admin, w.member])
    t.equal((await w.owner.live('POST', `${w.base}/tickets/${watched.id}/watchers`, { memberId: m.id, notifyOnComment: m === w.admin })).status, 201);
  const both = lines(await raw(w.owner.liveKey, `${w.base}/tickets/export?comments=true&watchers=true`));
  t.same(
    both.map((x: Any) => x.id),
    [watched.id, unwatched.id],
  );
  t.strictSame(both[0].watchers, (await w.owner.live('GET', `${w.base}/tickets/${watched.id}/watchers`)).body, 'the watchers as listed');
  t.equal(both[0].watchers.length, 2);
  t.strictSame(both[1].watchers, [], 'a ticket without watchers: an empty list');
  t.same(Object.keys(both[0]).slice(-2), ['comments', 'watchers'], 'last, after the comments');
  const alone = lines(await raw(w.owner.liveKey, `${w.base}/tickets/export?watchers=true`));
  t.notOk('comments' in alone[0], 'without comments=true, no comments');
  t.strictSame(alone[0].watchers, both[0].watchers);
  assertErrorShape(t, await w.owner.live('GET', `${w.base}/tickets/export?format=csv&watchers=true`), 400, 'watchers_need_ndjson');
});

t.test('more tickets than a page: each once, in order, to the last', async (t) => {
  const w = await world();
  t.ok(2_500 > 4 * EXPORT_PAGE_SIZE, 'several pages');
  const bulk = bulkTickets({ accountId: w.owner.accountId, livemode: true, brandId: w.brand.id }, 2_500);
  await db.raw(bulk.sql, bulk.bindings as never[]);
  const res = await raw(w.owner.liveKey, `${w.base}/tickets/export`);
  const ids = res.text
    .trimEnd()
    .split('\n')
    .map((l) => (JSON.parse(l) as { id: string }).id);
  t.equal(ids.length, 2_500, 'every ticket');
  t.equal(new Set(ids).size, 2_500, 'each once');
  t.same(ids, [...ids].sort(), 'in id order');
  t.equal(res.trailers['x-ticket-count'], '2500');
  const csv = await raw(w.owner.liveKey, `${w.base}/tickets/export?format=csv`);
  t.equal(csv.text.trimEnd().split('\n').length, 2_501, 'CSV: the header and every ticket');

  // Pages of 7: many statements of ids ahead, the last page short: the same document.
  const ctx = tenantCtx(systemCtx(services), w.owner.accountId, true);
  const small = await exportTickets(ctx, w.brand.id, {}, { format: 'ndjson', comments: false, commentShape: 'threads', pageSize: 7 });
  const parts: Buffer[] = [];
  for await (const part of small.chunks) parts.push(part);
  t.equal(Buffer.concat(parts).toString('utf8'), res.text, 'pages of 7: the same text');
  t.equal(small.written, 2_500);

  // Cut short after 1,234 tickets: taken up after the last one received, the rest, each once.
  const rest = lines(await raw(w.owner.liveKey, `${w.base}/tickets/export?after=${ids[1_233]}`));
  t.same(
    rest.map((r) => r.id),
    ids.slice(1_234),
    'after=: the tickets after that id, in order',
  );
  t.same(lines(await raw(w.owner.liveKey, `${w.base}/tickets/export?after=${ids[2_499]}`)), [], 'after the last one: none');
});

t.test('who may export: another tenant never, a member no, an admin and the owner yes', async (t) => {
  const w = await world();
  const ticket = (await w.owner.live('POST', `${w.base}/tickets`, { title: 'Secret' })).body;
  for (const [label, call, base] of await outsiders(app, w.owner, w.base)) {
    const res = await call('GET', `${base}/tickets/export`);
    if (base === w.base) assertNotFound(t, res, label);
    else {
      t.equal(res.status, 200, `${label}: its own brand`);
      t.notOk(JSON.stringify(res.body ?? '').includes(ticket.id), `${label}: not the owner's ticket`);
    }
  }
  const side = await makeBrand(w.owner.live, 'Elsewhere');
  const limited = (await w.owner.live('POST', '/v1/accounts/me/api-keys', { name: 'Side only', allBrands: false, brandIds: [side.id] })).body;
  assertNotFound(t, await client(app, limited.key)('GET', `${w.base}/tickets/export`), 'a key limited to another brand');
  t.equal((await client(app)('GET', `${w.base}/tickets/export`)).status, 401, 'no credential: 401');

  assertErrorShape(t, await w.asMember.call('GET', `${w.base}/tickets/export`), 403, 'insufficient_role');
  t.equal(lines(await raw(w.asAdmin.token, `${w.base}/tickets/export`))[0].id, ticket.id, 'an admin exports');
  t.equal(lines(await raw(w.asOwner.token, `${w.base}/tickets/export`))[0].id, ticket.id, 'the owner exports');
});

t.test('bad input: 400 in the error shape', async (t) => {
  const w = await world();
  for (const query of [
    'format=xml',
    'comments=maybe',
    'watchers=maybe',
    'limit=10',
    'sort=title',
    'cursor=abc',
    'status=',
    'createdAfter=yesterday',
    'after=',
    `after=${'x'.repeat(65)}`,
  ]) {
    assertErrorShape(t, await w.owner.live('GET', `${w.base}/tickets/export?${query}`), 400, 'validation_failed');
  }
  const many = Array.from({ length: 21 }, (_, i) => `tag_${String(i).padStart(26, '0')}`).join(',');
  const res = await w.owner.live('GET', `${w.base}/tickets/export?tagIds=${many}`);
  t.equal(res.status, 400, 'more tags than the list takes');
});

t.test('a slow client holds the export back; one that leaves stops it; the server answers after', async (t) => {
  const w = await world();
  const bulk = bulkTickets({ accountId: w.owner.accountId, livemode: true, brandId: w.brand.id }, 12_000, { body: "repeat('x', 2000)" });
  await db.raw(bulk.sql, bulk.bindings as never[]);
  await app.listen({ port: 0, host: '127.0.0.1' });
  t.teardown(() => app.server.closeAllConnections());
  const port = (app.server.address() as net.AddressInfo).port;
  const pool = (db.client as { pool: { numUsed(): number } }).pool;
  let pagesRead = 0;
  const countPages = (q: { sql: string }) => void (q.sql.includes('view_json') && pagesRead++);
  db.on('query', countPages);
  t.teardown(() => void db.removeListener('query', countPages));

  /** An export that takes its first bytes, then reads no more until `leave` (a client that stops reading, then goes away). */
  const slowClient = () =>
    new Promise<{ leave: () => void }>((resolve, reject) => {
      const req = http.get({ port, host: '127.0.0.1', path: `${w.base}/tickets/export?comments=true`, headers: { authorization: `Bearer ${w.owner.liveKey}` } }, (res) => {
        t.equal(res.statusCode, 200);
        res.once('data', () => {
          res.pause();
          resolve({ leave: () => req.destroy() });
        });
      });
      req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
    });

  // 30 MB in pages of EXPORT_PAGE_SIZE_WITH_COMMENTS tickets: unread, the server stops after what
  // its buffer and the socket's hold (and the pages it reads ahead). Without backpressure it
  // would read every page at once: waited for, up to a bound.
  const pages = 12_000 / EXPORT_PAGE_SIZE_WITH_COMMENTS;
  const slow = await slowClient();
  const bound = Date.now() + 1500;
  await until('every page read, or the bound', () => pagesRead >= pages || Date.now() > bound);
  t.ok(pagesRead < pages / 2, `pages read while the client does not read: ${pagesRead} of ${pages}`);
  slow.leave();
  await until('the export to let its connections go', () => pool.numUsed() === 0);
  const atLeave = pagesRead;
  for (let i = 0; i < 3; i++) (await slowClient()).leave();
  await until('the exports to let their connections go', () => pool.numUsed() === 0);
  t.ok(pagesRead - atLeave < pages, `three clients that left at once: ${pagesRead - atLeave} pages read in all`);

  const again = await raw(w.owner.liveKey, `${w.base}/tickets/export?status=closed`);
  t.equal(again.status, 200, 'the server still answers');
  t.equal(again.trailers['x-ticket-count'], '0');
});

t.test('an export that fails midway is cut short: no clean end, no trailer; the next one is whole', async (t) => {
  const w = await world();
  const bulk = bulkTickets({ accountId: w.owner.accountId, livemode: true, brandId: w.brand.id }, 12_000, { body: "repeat('y', 2000)" });
  await db.raw(bulk.sql, bulk.bindings as never[]);
  await app.listen({ port: 0, host: '127.0.0.1' }).catch(() => undefined); // listening already when the test before ran
  const port = (app.server.address() as net.AddressInfo).port;
  const pool = (db.client as { pool: { numUsed(): number } }).pool;
  const ended = await new Promise<{ complete: boolean; trailer: string | undefined; bytes: number }>((resolve, reject) => {
    const req = http.get({ port, host: '127.0.0.1', path: `${w.base}/tickets/export?comments=true`, headers: { authorization: `Bearer ${w.owner.liveKey}` } }, (res) => {
      let bytes = 0;
      res.once('data', async () => {
        res.pause();
        // The pages asked for so far done, the comments' table goes away: the next page fails.
        await until('the pages in flight to end', () => pool.numUsed() === 0);
        await db.raw('alter table comments rename to comments_away');
        res.resume();
      });
      res.on('data', (chunk: Buffer) => (bytes += chunk.length));
      res.on('error', () => undefined);
      res.on('close', () => resolve({ complete: res.complete, trailer: res.trailers['x-ticket-count'], bytes }));
    });
    req.on('error', reject);
  }).finally(() => db.raw('alter table if exists comments_away rename to comments'));
  t.equal(ended.complete, false, `the response never ends cleanly (${ended.bytes} bytes came)`);
  t.equal(ended.trailer, undefined, 'and has no trailer');
  const again = await raw(w.owner.liveKey, `${w.base}/tickets/export?comments=true&status=closed`);
  t.equal(again.status, 200, 'the server answers the next export');
  t.equal(again.trailers['x-ticket-count'], '0');
});
