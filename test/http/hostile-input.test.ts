/**
 * What an attacker or a broken client can send, and what the database can do mid-request: each
 * answer is a 4xx (or a 503 with Retry-After) in the error shape with its request id, never a 500,
 * and nothing is stored.
 */
import net from 'node:net';
import t from 'tap';
import { jsonTextProblem, MAX_JSON_DEPTH } from '../../server/core/json-text.js';
import { buildApp } from '../../server/app.js';
import { createDb } from '../../server/core/db.js';
import { assertErrorShape, client, makeTicket, mustCreate, ownerWithBrand, testApp, testConfig } from '../helpers/app.js';
import { cuttableProxy } from '../helpers/proxy.js';
import { aCommitSleeps, faultTriggerDdl } from '../helpers/db.js';
import { testNow } from '../helpers/clock.js';

const { app, db, url } = await testApp(t);
const { owner, base } = await ownerWithBrand(app);
const ticket = await makeTicket(owner.live, base, { title: 'Printer on fire' });

/** A JSON body with `value` (raw JSON text) at `path`, sent as written. */
const raw = (template: string, value: string) => template.replace('$', value);
const nested = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
const deepArray = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

t.test('the JSON text check: depth and lone surrogates, in one pass', async (t) => {
  t.equal(jsonTextProblem(nested(MAX_JSON_DEPTH)), null, 'the limit itself is fine');
  t.same(jsonTextProblem(nested(MAX_JSON_DEPTH + 1)), { kind: 'too_deep', depth: MAX_JSON_DEPTH + 1 });
  t.equal(jsonTextProblem(`{"a":"${'['.repeat(500)}"}`), null, 'brackets inside a string are text');
  t.equal(jsonTextProblem('{"a":"\\"[[[[","b":"\\\\"}', 2), null, 'escaped quotes and backslashes do not end or open strings');
  t.equal(jsonTextProblem('{"a":"smile \\ud83d\\ude00"}'), null, 'a surrogate pair is a character');
  t.equal(jsonTextProblem('{"a":"\\uD83D\\uDE00"}'), null, 'in capitals too');
  t.match(jsonTextProblem('{"a":"x\\ud800y"}'), { kind: 'lone_surrogate' }, 'a high surrogate alone');
  t.match(jsonTextProblem('{"a":"x\\udc00"}'), { kind: 'lone_surrogate' }, 'a low surrogate alone');
  t.match(jsonTextProblem('{"a":"\\ud800\\u0041"}'), { kind: 'lone_surrogate' }, 'a high surrogate before a letter');
  t.match(jsonTextProblem('{"\\ud800":1}'), { kind: 'lone_surrogate' }, 'in a key');
  t.equal(jsonTextProblem('{"a":"\\\\ud800"}'), null, 'an escaped backslash followed by text is not an escape');
});

t.test('a lone UTF-16 surrogate in any string is 400 invalid_unicode, and nothing is stored', async (t) => {
  const cases: [string, string, string][] = [
    ['POST', `${base}/tickets`, '{"title":$}'],
    ['POST', `${base}/tickets`, '{"title":"ok","body":$}'],
    ['POST', `${base}/tickets`, '{"title":"ok","customerName":$,"customerEmail":"ann@example.com"}'],
    ['POST', `${base}/tickets`, '{"title":"ok","createdBy":$}'],
    ['POST', `${base}/tickets`, '{"title":"ok","sourceId":$}'],
    ['POST', `${base}/tickets`, '{"title":"ok","metadata":{"note":$}}'],
    ['PATCH', `${base}/tickets/${ticket.id}`, '{"title":$}'],
    ['POST', `${base}/categories`, '{"name":$}'],
    ['POST', `${base}/tags`, '{"name":$}'],
    ['POST', `${base}/companies`, '{"name":$}'],
    ['POST', `${base}/fields/ticket`, '{"key":"plan","label":"Plan","type":"text","defaultValue":$}'],
  ];
  for (const [method, url, template] of cases) {
    const res = await owner.live(method, url, raw(template, '"x\\ud800y"'));
    assertErrorShape(t, res, 400, 'invalid_unicode');
  }
  const tickets = await owner.live('GET', `${base}/tickets`);
  t.equal(tickets.body.data.length, 1, 'no ticket was created');
  t.equal(tickets.body.data[0].title, 'Printer on fire', 'the ticket was not changed');
  t.same((await owner.live('GET', `${base}/categories`)).body, [], 'no category');

  const comment = await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'first' });
  assertErrorShape(t, await owner.live('PATCH', `${base}/comments/${comment.id}`, raw('{"body":$}', '"\\udfff"')), 400, 'invalid_unicode');

  const emoji = await owner.live('POST', `${base}/tickets`, '{"title":"smile \\ud83d\\ude00"}');
  t.equal(emoji.status, 201, 'a surrogate pair escape is an ordinary character');
  t.equal(emoji.body.title, 'smile 😀');
});

t.test('JSON nested deeper than the limit is 400 json_too_deep, without echoing a stack overflow', async (t) => {
  const cases: [string, string, string, number][] = [
    ['PATCH', base, '{"settings":$}', 2_000],
    ['PATCH', base, '{"metadata":{"x":$}}', 2_000],
    ['POST', `${base}/tickets`, '{"title":"deep","metadata":{"x":$}}', 4_000],
    ['POST', `${base}/tickets`, '{"title":"deep","customFields":$}', 100_000],
    ['PUT', `${base}/schema`, '{"type":"object","properties":$}', 1_000],
  ];
  for (const [method, url, template, depth] of cases) {
    const res = await owner.live(method, url, raw(template, nested(depth)));
    assertErrorShape(t, res, 400, 'json_too_deep');
    t.notMatch(res.body.message, /call stack/i);
  }
  const arrays = await owner.live('POST', `${base}/tickets`, raw('{"title":"deep","links":$}', deepArray(50_000)));
  assertErrorShape(t, arrays, 400, 'json_too_deep');
  t.equal((await owner.live('GET', `${base}/tickets`)).body.data.filter((x: { title: string }) => x.title === 'deep').length, 0, 'nothing stored');
  const fine = await owner.live('POST', `${base}/tickets`, raw('{"title":"nested but fine","metadata":{"x":$}}', nested(20)));
  t.equal(fine.status, 201, 'ordinary nesting is accepted');
});

t.test('a free-form JSON value over 64 KB is 400 naming the field', async (t) => {
  const big = 'x'.repeat(70_000);
  const cases: [string, string, unknown, string][] = [
    ['POST', `${base}/tickets`, { title: 'big', metadata: { note: big } }, 'metadata'],
    ['POST', `${base}/tickets`, { title: 'big', sourceData: { raw: big } }, 'sourceData'],
    ['PATCH', base, { settings: { raw: big } }, 'settings'],
    ['POST', `${base}/tickets/${ticket.id}/comments`, { body: 'big', metadata: { raw: big } }, 'metadata'],
    ['PUT', `${base}/schema`, { type: 'object', description: big }, '(body)'],
  ];
  for (const [method, url, body, field] of cases) {
    const res = await owner.live(method, url, body);
    assertErrorShape(t, res, 400, 'validation_failed');
    t.ok(
      res.body.errors.some((e: { field: string; message: string }) => e.field === field && e.message === 'must be at most 65536 bytes as JSON'),
      `${method} ${url}: ${field} is named`,
    );
  }
  t.equal((await owner.live('POST', `${base}/tickets`, { title: 'just fits', metadata: { note: 'x'.repeat(60_000) } })).status, 201);
});

t.test('malformed multipart on both upload routes is 400 invalid_multipart', async (t) => {
  const urls = [`${base}/tickets/${ticket.id}/attachments/upload`, `${base}/attachments/pending/upload`];
  const boundary = 'XyZ123';
  const truncated = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nhello wor`;
  for (const url of urls) {
    const noBoundary = await app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${owner.liveKey}`, 'content-type': 'multipart/form-data' }, payload: 'abc' });
    assertErrorShape(t, { status: noBoundary.statusCode, body: noBoundary.json(), headers: noBoundary.headers }, 400, 'invalid_multipart');
    const cut = await app.inject({
      method: 'POST',
      url,
      headers: { authorization: `Bearer ${owner.liveKey}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
      payload: truncated,
    });
    assertErrorShape(t, { status: cut.statusCode, body: cut.json(), headers: cut.headers }, 400, 'invalid_multipart');
  }
  t.same((await owner.live('GET', `${base}/tickets/${ticket.id}/attachments`)).body, [], 'no attachment was stored');
});

t.test("the router's own errors are in the error shape with a request id", async (t) => {
  const long = await app.inject({ method: 'GET', url: `${base}/tickets/${'x'.repeat(600)}`, headers: { authorization: `Bearer ${owner.liveKey}` } });
  const longReply = { status: long.statusCode, body: long.json(), headers: long.headers };
  assertErrorShape(t, longReply, 414, 'uri_too_long');
  t.notMatch(long.body, 'xxxxxxxxxx', 'the URL is not echoed');
  const bad = await app.inject({ method: 'GET', url: `${base}/tickets/%E0%A4%A`, headers: { authorization: `Bearer ${owner.liveKey}` } });
  assertErrorShape(t, { status: bad.statusCode, body: bad.json(), headers: bad.headers }, 400, 'invalid_url');
});

t.test('a connection lost at COMMIT is 503 with Retry-After, nothing half-done, and the next request works', async (t) => {
  // At COMMIT a deferred constraint trigger ends its own backend, as a database restart would.
  await faultTriggerDdl(
    db,
    `create function ticketd_test_die_at_commit() returns trigger language plpgsql as $$
    begin
      if new.body = 'die at commit' then perform pg_terminate_backend(pg_backend_pid()); end if;
      return null;
    end $$`,
    `create constraint trigger die_at_commit after insert on comments deferrable initially deferred
      for each row execute function ticketd_test_die_at_commit()`,
  );
  t.teardown(() => faultTriggerDdl(db, 'drop trigger die_at_commit on comments', 'drop function ticketd_test_die_at_commit()'));
  const res = await owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'die at commit' });
  assertErrorShape(t, res, 503, 'service_unavailable');
  t.equal(res.headers['retry-after'], '2', 'clients are told when to retry');
  const comments = await owner.live('GET', `${base}/tickets/${ticket.id}/comments`);
  t.equal(comments.status, 200, 'the next request is served on a fresh connection');
  t.notOk(
    comments.body.some((c: { body: string }) => c.body === 'die at commit'),
    'the comment was not stored',
  );
});

t.test('a TCP connection cut while COMMIT runs is 503 with Retry-After, and the next request works', async (t) => {
  // The commit waits in a deferred trigger (a reply is one statement: its commit ends it); the
  // test cuts the connection while it waits, as a database host going away would: node-postgres
  // then reports a bare "Connection terminated".
  await faultTriggerDdl(
    db,
    `create function ticketd_test_slow_commit() returns trigger language plpgsql as $$
    begin
      if new.body = 'slow commit' then perform pg_sleep(5); end if;
      return null;
    end $$`,
    `create constraint trigger slow_commit after insert on comments deferrable initially deferred
      for each row execute function ticketd_test_slow_commit()`,
  );
  t.teardown(() => faultTriggerDdl(db, 'drop trigger slow_commit on comments', 'drop function ticketd_test_slow_commit()'));
  const proxy = await cuttableProxy(t, url);
  const viaProxy = createDb(proxy.url, { poolMax: 2, poolMin: 0, acquireTimeoutMs: 1500 });
  const config = testConfig({ DATABASE_URL: proxy.url });
  const proxiedApp = await buildApp({ clock: testNow, config, db: viaProxy });
  t.teardown(async () => {
    await proxiedApp.close();
    await viaProxy.destroy();
  });
  const pending = client(proxiedApp, owner.liveKey)('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'slow commit' });
  while (!(await aCommitSleeps(db))) await new Promise((r) => setImmediate(r));
  proxy.cut();
  const res = await pending;
  assertErrorShape(t, res, 503, 'service_unavailable');
  t.equal(res.headers['retry-after'], '2');
  proxy.restore();
  t.equal((await client(proxiedApp, owner.liveKey)('GET', `${base}/tickets/${ticket.id}`)).status, 200, 'served again once the database is back');
});

t.test('a stalled request body gets 408 in the error shape and its connection is closed', async (t) => {
  const { app: strict } = await testApp(t, { TICKETD_REQUEST_TIMEOUT_MS: '500', TICKETD_HEADERS_TIMEOUT_MS: '500' });
  await strict.listen({ port: 0, host: '127.0.0.1' });
  const port = (strict.server.address() as net.AddressInfo).port;
  const socket = net.connect(port, '127.0.0.1');
  let received = '';
  socket.on('data', (chunk) => (received += chunk.toString()));
  socket.write(`POST /v1/accounts HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":"x`);
  // No timer here: the server must close the connection by itself (tap's own timeout fails a hang).
  await new Promise<void>((resolve) => socket.on('close', () => resolve()));
  t.match(received, /^HTTP\/1\.1 408 /, '408 Request Timeout');
  const body = JSON.parse(received.slice(received.indexOf('\r\n\r\n') + 4));
  t.match(body, { statusCode: 408, error: 'Request Timeout', code: 'request_timeout' });
  t.match(received, new RegExp(`X-Request-Id: ${body.requestId}`, 'i'), 'the header names the body request id');
});
