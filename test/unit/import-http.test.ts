import t from 'tap';
import { backoffMs } from '../../server/integrations/import-http.js';

t.test("an import source's transient failures: a backoff doubling from its base, capped, ±20% jitter", async (t) => {
  t.same(
    [1, 2, 3, 4].map((n) => backoffMs(n, 250, 60_000, 0.5)),
    [250, 500, 1000, 2000],
  );
  t.equal(backoffMs(20, 250, 60_000, 0.5), 60_000, 'capped');
  t.equal(backoffMs(1, 1000, 60_000, 0), 800, 'jitter: at least 80%');
  t.equal(backoffMs(1, 1000, 60_000, 0.999999), 1200, 'and at most 120%');
});
