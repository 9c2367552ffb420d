/**
 * The first page of the big list with one and with two API processes on one database: the
 * second is a `--role api` process started beside the bench's server. Both are driven at once by
 * one autocannon each, the connections split evenly (as a round robin in front would); requests/s
 * are summed and the latencies merged.
 */
import { once } from 'node:events';
import autocannon from 'autocannon';
import { percentile } from './floor.js';
import { startTicketd } from './server.js';

export interface ScaleRow {
  scenario: string;
  'API processes': number;
  connections: number;
  'req/s': number;
  'p50 ms': number;
  'p99 ms': number;
  non2xx: number;
  errors: number;
}

/** Enough requests in flight that a second process has work to take. */
const CONNECTIONS = 8;

async function across(urls: string[], path: string, headers: Record<string, string>, duration: number): Promise<Omit<ScaleRow, 'scenario'>> {
  const run = (url: string, seconds: number, latencies?: number[]) =>
    new Promise<autocannon.Result>((resolve, reject) => {
      const instance = autocannon({ url: `${url}${path}`, headers, connections: CONNECTIONS / urls.length, duration: seconds }, (err, result) =>
        err ? reject(err) : resolve(result),
      );
      if (latencies)
        instance.on('response', (_c: unknown, status: number, _b: number, ms: number) => {
          if (status < 300) latencies.push(ms);
        });
    });
  await Promise.all(urls.map((url) => run(url, 1)));
  const latencies: number[] = [];
  const results = await Promise.all(urls.map((url) => run(url, duration, latencies)));
  latencies.sort((a, b) => a - b);
  const round = (x: number) => Math.round(x * 100) / 100;
  return {
    'API processes': urls.length,
    connections: CONNECTIONS,
    'req/s': Math.round(results.reduce((sum, r) => sum + r.requests.average, 0)),
    'p50 ms': round(percentile(latencies, 50)),
    'p99 ms': round(percentile(latencies, 99)),
    non2xx: results.reduce((sum, r) => sum + r.non2xx, 0),
    errors: results.reduce((sum, r) => sum + r.errors + r.timeouts, 0),
  };
}

export async function listWithApiProcesses(
  databaseUrl: string,
  serverUrl: string,
  path: string,
  headers: Record<string, string>,
  options: { duration: number; env: Record<string, string>; log: (line: string) => void },
): Promise<ScaleRow[]> {
  const rows: ScaleRow[] = [];
  const measured = (row: Omit<ScaleRow, 'scenario'>) => {
    const full = { scenario: 'list, first page', ...row };
    options.log(`  ${row['API processes']} API process(es): ${row['req/s']}/s p50 ${row['p50 ms']} p99 ${row['p99 ms']}${row.non2xx ? ` non2xx ${row.non2xx}` : ''}`);
    rows.push(full);
  };
  measured(await across([serverUrl], path, headers, options.duration));
  const second = await startTicketd('api', databaseUrl, options.env);
  try {
    measured(await across([serverUrl, second.info.url], path, headers, options.duration));
  } finally {
    second.child.kill('SIGTERM');
    await once(second.child, 'exit');
  }
  return rows;
}
