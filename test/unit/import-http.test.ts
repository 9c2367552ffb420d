import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { backoffMs, SourceCut, SourceHttp } from '../../server/integrations/import-http.js';

t.test("an import source's transient failures: a backoff doubling from its base, capped, ±20% jitter", async (t) => {
  t.same(
    [1, 2, 3, 4].map((n) => backoffMs(n, 250, 60_000, 0.5)),
    [250, 500, 1000, 2000],
  );
  t.equal(backoffMs(20, 250, 60_000, 0.5), 60_000, 'capped');
  t.equal(backoffMs(1, 1000, 60_000, 0), 800, 'jitter: at least 80%');
  t.equal(backoffMs(1, 1000, 60_000, 0.999999), 1200, 'and at most 120%');
});

t.test("an NDJSON answer a line at a time: lines split across pieces (a character's bytes too); a cut after it began is a SourceCut", async (t) => {
  const text = Buffer.from('{"id":"a","name":"Zoë"}\n{"id":"b"}\n');
  const split = text.indexOf(Buffer.from('ë')) + 1; // within the two bytes of ë
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    res.write(text.subarray(0, split));
    if (req.url === '/cut') {
      setTimeout(() => res.destroy(), 50);
      return;
    }
    setTimeout(() => res.end(text.subarray(split)), 20);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  const source = new SourceHttp({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, headers: {}, attempts: 1 });
  const read: unknown[] = [];
  for await (const line of source.lines('whole')) read.push(line);
  t.same(read, [{ id: 'a', name: 'Zoë' }, { id: 'b' }]);
  const cut: unknown[] = [];
  await t.rejects(
    (async () => {
      for await (const line of source.lines('cut')) cut.push(line);
    })(),
    SourceCut,
  );
  t.same(cut, [], 'nothing of a line that did not come whole');
});
