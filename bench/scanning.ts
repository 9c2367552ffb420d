/**
 * `npm run bench -- --scan`: what scanning uploads with clamd costs. Prints tables; asserts nothing.
 *
 *  - clamd alone: files of 1, 10 and 50 MB (random bytes, new ones every time: clamd remembers the
 *    files it found clean by their hash) streamed to a clamd of the bench's own
 *    (test/helpers/clamd.ts: one signature, so this is the daemon's floor: reading, hashing and
 *    its file-type checks, not a full signature database's matching) over its Unix socket.
 *  - Through ticketd: the same files uploaded (multipart, on a ticket) to one API process without
 *    scanning and one scanning through that clamd, on one database, in alternating turns; the
 *    median of the turns, the ratio, and the milliseconds a MB scanning adds.
 * Needs clamd (apt-get install clamav-daemon).
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync, createReadStream } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { ClamdScanner } from '../server/integrations/clamd.js';
import { clamdBinary, launchClamd } from '../test/helpers/clamd.js';
import { adminDatabase, sql, startTicketd, stop, withDatabase } from './server.js';

const SIZES_MB = [1, 10, 50];
const TURNS = Number(process.env.BENCH_TURNS ?? 5);
const MB = 1024 * 1024;
const log = (s: string) => process.stderr.write(`${s}\n`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function table(rows: Record<string, string | number>[]): string {
  const keys = Object.keys(rows[0]!);
  const width = keys.map((k) => Math.max(k.length, ...rows.map((r) => String(r[k]).length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(width[i]!)).join('  ');
  return [line(keys), ...rows.map((r) => line(keys.map((k) => String(r[k]))))].join('\n');
}

export async function runScanBench(): Promise<void> {
  if (!clamdBinary()) throw new Error('clamd is not installed (apt-get install clamav-daemon)');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-bench-scan-'));
  const file = path.join(dir, 'upload.bin');
  const clamd = await launchClamd();
  const { adminUrl, cleanup } = await adminDatabase({ max_connections: '50' });
  const database = `ticketd_bench_scan_${randomBytes(4).toString('hex')}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);
  const children: ChildProcess[] = [];
  try {
    log('clamd alone…');
    const scanner = new ClamdScanner({ socket: clamd.socket }, 120_000);
    const alone: Record<string, string | number>[] = [];
    for (const mb of SIZES_MB) {
      const times: number[] = [];
      for (let i = 0; i < TURNS; i++) {
        writeFileSync(file, randomBytes(mb * MB));
        const started = performance.now();
        const verdict = await scanner.scan(createReadStream(file));
        times.push(performance.now() - started);
        if (verdict.infected) throw new Error(`random bytes found infected: ${verdict.signature}`);
      }
      alone.push({ MB: mb, 'scan ms (median)': median(times).toFixed(1), 'ms per MB': (median(times) / mb).toFixed(2) });
    }

    log('through ticketd…');
    const env = { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '1000', TICKETD_ATTACHMENT_MAX_BYTES: String(64 * MB), TICKETD_DATA_DIR: dir };
    const plain = await startTicketd('api', dbUrl, env);
    children.push(plain.child);
    const scanning = await startTicketd('api', dbUrl, { ...env, TICKETD_CLAMD_SOCKET: clamd.socket, TICKETD_CLAMD_TIMEOUT_MS: '120000' });
    children.push(scanning.child);
    const signup = await fetch(`${plain.info.url}/v1/accounts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: `bench-scan-${database}@example.com` }),
    });
    const key = ((await signup.json()) as { apiKeys: { live: { key: string } } }).apiKeys.live.key;
    const auth = { authorization: `Bearer ${key}` };
    const brand = (await (
      await fetch(`${plain.info.url}/v1/brands`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Files' }) })
    ).json()) as { id: string };
    const ticket = (await (
      await fetch(`${plain.info.url}/v1/brands/${brand.id}/tickets`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ title: 'Files' }),
      })
    ).json()) as { id: string };
    const upload = async (base: string, bytes: Blob): Promise<{ ms: number; scanStatus: string }> => {
      const form = new FormData();
      form.append('file', bytes, 'file.bin');
      const started = performance.now();
      const res = await fetch(`${base}/v1/brands/${brand.id}/tickets/${ticket.id}/attachments/upload`, { method: 'POST', headers: auth, body: form });
      const body = (await res.json()) as { attachment: { scanStatus: string } };
      if (res.status !== 201) throw new Error(`upload: ${res.status} ${JSON.stringify(body)}`);
      return { ms: performance.now() - started, scanStatus: body.attachment.scanStatus };
    };
    const through: Record<string, string | number>[] = [];
    for (const mb of SIZES_MB) {
      const off: number[] = [];
      const on: number[] = [];
      for (let i = 0; i < TURNS; i++) {
        const bytes = new Blob([randomBytes(mb * MB)]);
        // Alternating which goes first: neither always meets a warm or a cold disk cache.
        const order = i % 2 ? ([scanning, plain] as const) : ([plain, scanning] as const);
        for (const server of order) {
          const { ms, scanStatus } = await upload(server.info.url, bytes);
          (server === plain ? off : on).push(ms);
          if (scanStatus !== (server === plain ? 'not_scanned' : 'clean')) throw new Error(`unexpected scanStatus ${scanStatus}`);
        }
      }
      const [a, b] = [median(off), median(on)];
      through.push({
        MB: mb,
        'upload ms, no scanning': a.toFixed(1),
        'upload ms, clamd': b.toFixed(1),
        ratio: (b / a).toFixed(2),
        'scanning adds ms per MB': ((b - a) / mb).toFixed(2),
      });
    }
    process.stdout.write(`\nclamd alone (median of ${TURNS}; a one-signature database: the daemon's floor)\n${table(alone)}\n`);
    process.stdout.write(`\nmultipart upload through ticketd (median of ${TURNS} turns, alternating)\n${table(through)}\n`);
    process.stdout.write(`${JSON.stringify({ turns: TURNS, alone, through })}\n`);
  } finally {
    await stop(children);
    await clamd.stop();
    await sql(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await cleanup();
    rmSync(dir, { recursive: true, force: true });
  }
}
