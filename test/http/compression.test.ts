import t from 'tap';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { COMPRESS_MIN_BYTES } from '../../server/core/compression.js';
import { makeBrand, signup, testApp } from '../helpers/app.js';

// JSON responses are compressed when the client asks (Accept-Encoding) and they are large enough;
// the conditional reads' tag and 304 are the same whichever coding a client takes.
const { app } = await testApp(t);

async function world() {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}`;
  for (let i = 0; i < 6; i++) {
    const res = await owner.live('POST', `${base}/tickets`, { title: `Ticket ${i}`, body: `A long enough body, ${i}. `.repeat(40) });
    t.equal(res.status, 201);
  }
  const get = (url: string, headers: Record<string, string> = {}) => app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${owner.liveKey}`, ...headers } });
  return { base, get };
}

t.test('a list page: brotli or gzip when asked, as it is otherwise; the same JSON and the same tag', async (t) => {
  const { base, get } = await world();
  const plain = await get(`${base}/tickets`);
  t.equal(plain.statusCode, 200);
  t.notOk(plain.headers['content-encoding'], 'not compressed when not asked');
  t.ok(plain.rawPayload.length >= COMPRESS_MIN_BYTES, 'the page is large enough to compress');
  const json = plain.json();

  for (const [header, coding, decode] of [
    ['gzip, deflate, br', 'br', brotliDecompressSync],
    ['br', 'br', brotliDecompressSync],
    ['gzip', 'gzip', gunzipSync],
    ['deflate, gzip;q=0.5, br;q=0', 'gzip', gunzipSync],
  ] as const) {
    const res = await get(`${base}/tickets`, { 'accept-encoding': header });
    t.equal(res.statusCode, 200);
    t.equal(res.headers['content-encoding'], coding, `${header}: ${coding}`);
    t.ok(res.rawPayload.length < plain.rawPayload.length / 2, `${header}: smaller by more than half`);
    t.strictSame(JSON.parse(decode(res.rawPayload).toString('utf8')), json, `${header}: the same page`);
    t.equal(res.headers.etag, plain.headers.etag, `${header}: the same tag`);
    t.match(String(res.headers.vary), /Authorization, Cookie.*Accept-Encoding|Accept-Encoding.*Authorization, Cookie/i, 'both Vary fields');
    const again = await get(`${base}/tickets`, { 'accept-encoding': header, 'if-none-match': String(plain.headers.etag) });
    t.equal(again.statusCode, 304, `${header}: a tag from the uncompressed page answers 304`);
    t.equal(again.rawPayload.length, 0, 'with no body');
    t.notOk(again.headers['content-encoding'], 'and no coding');
  }
  for (const header of ['identity', 'gzip;q=0, br;q=0', 'deflate', 'compress']) {
    const res = await get(`${base}/tickets`, { 'accept-encoding': header });
    t.notOk(res.headers['content-encoding'], `${header}: as it is`);
    t.strictSame(res.json(), json);
  }
});

t.test('a small response goes as it is, whatever the client accepts', async (t) => {
  const { base, get } = await world();
  const res = await get(base, { 'accept-encoding': 'gzip, br' });
  t.equal(res.statusCode, 200);
  t.ok(res.rawPayload.length < COMPRESS_MIN_BYTES);
  t.notOk(res.headers['content-encoding']);
  t.equal(res.json().id, base.split('/').at(-1));
  const missing = await get(`${base}/tickets/tkt_00000000000000000000000000`, { 'accept-encoding': 'gzip' });
  t.equal(missing.statusCode, 404);
  t.notOk(missing.headers['content-encoding'], 'an error body is small');
});
