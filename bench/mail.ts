/**
 * `npm run bench -- --mail`: what a brand's own mail costs. Prints tables; asserts nothing.
 *
 *  - DKIM signing: one agent reply (text and HTML, threading headers) composed by nodemailer, with
 *    and without the domain's DKIM key (RSA 2048); the signing cost per message is the difference.
 *  - The dashboard's polls: `GET /v1/brands/{id}/email-connections` and `/domains` over 20 brands
 *    (half with a mailbox and a domain, half without), next to a trivial authenticated read of the
 *    same brands (`GET /v1/brands/{id}`), through the real server with autocannon.
 *  - IMAP ingestion: a mailbox of INGESTED messages on an IMAP server in this process
 *    (hoodiecrow-imap, in memory, on loopback), taken in by one `--role dispatcher` process, then
 *    by two; messages per second from the dispatchers' start to the last ticket.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type { AddressInfo, Server } from 'node:net';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import autocannon from 'autocannon';
import nodemailer from 'nodemailer';
import { adminDatabase, sql, startTicketd, stop, withDatabase } from './server.js';

const SIGNED_MESSAGES = 2_000;
const BRANDS = 20;
const INGESTED = 2_000;
const log = (s: string) => process.stderr.write(`${s}\n`);

/** Milliseconds per message to compose `n` replies, signed with `dkim` or not. */
async function composeMs(n: number, dkim?: { domainName: string; keySelector: string; privateKey: string }): Promise<number> {
  const transport = nodemailer.createTransport({ streamTransport: true, buffer: true, ...(dkim ? { dkim } : {}) });
  const body = 'Thanks for writing in. '.repeat(40);
  const send = (i: number) =>
    transport.sendMail({
      from: '"Acme Support" <support@acme.example>',
      to: 'customer@example.net',
      subject: `Re: [ACME-${1000 + i}] My order has not arrived`,
      text: body,
      html: `<p>${body}</p>`,
      messageId: `<reply-${i}@acme.example>`,
      inReplyTo: `<customer-${i}@example.net>`,
      references: [`<customer-${i}@example.net>`],
    });
  for (let i = 0; i < 50; i++) await send(i); // warm-up
  const started = performance.now();
  for (let i = 0; i < n; i++) await send(i);
  return (performance.now() - started) / n;
}

async function signingCost(): Promise<Record<string, string | number>> {
  const { privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'der' },
  });
  const plain = await composeMs(SIGNED_MESSAGES);
  const signed = await composeMs(SIGNED_MESSAGES, { domainName: 'acme.example', keySelector: 'td01', privateKey });
  return { messages: SIGNED_MESSAGES, 'compose ms': plain.toFixed(3), 'compose + DKIM ms': signed.toFixed(3), 'DKIM signing ms per message': (signed - plain).toFixed(3) };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function api(base: string, key: string, method: string, url: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${url}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function latency(base: string, key: string, urls: string[]): Promise<{ p50: number; p99: number; rps: number }> {
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    autocannon({ url: base, connections: 4, duration: 5, headers: { authorization: `Bearer ${key}` }, requests: urls.map((path) => ({ method: 'GET', path })) }, (err, r) =>
      err ? reject(err) : resolve(r),
    );
  });
  if (result.non2xx || result.errors) throw new Error(`${urls[0]}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { p50: result.latency.p50, p99: result.latency.p99, rps: Math.round(result.requests.average) };
}

async function dashboardPolls(): Promise<Record<string, string | number>[]> {
  const { adminUrl, cleanup } = await adminDatabase({});
  const database = `ticketd_bench_mail_${randomBytes(4).toString('hex')}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const { child, info } = await startTicketd('all', withDatabase(adminUrl, database), { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '1000', TICKETD_RATE_LIMIT_PER_API_KEY: '100000000' });
  try {
    const base: string = info.url;
    const signup = await fetch(`${base}/v1/accounts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'bench-mail@example.com' }),
    });
    const key = ((await signup.json()) as { apiKeys: { live: { key: string } } }).apiKeys.live.key;
    const brands: string[] = [];
    for (let i = 0; i < BRANDS; i++) {
      const brand = await api(base, key, 'POST', '/v1/brands', { name: `Brand ${i}` });
      brands.push(brand.body.id);
      if (i % 2) continue;
      await api(base, key, 'POST', `/v1/brands/${brand.body.id}/domains`, { domain: `mail${i}.acme.example` });
      await api(base, key, 'POST', `/v1/brands/${brand.body.id}/email-connections`, { provider: 'IMAP', email: `desk${i}@acme.example`, host: '93.184.215.14', password: 'pw' });
    }
    const rows: Record<string, string | number>[] = [];
    const trivial = await latency(
      base,
      key,
      brands.map((b) => `/v1/brands/${b}`),
    );
    for (const [what, suffix] of [
      ['email-connections', '/email-connections'],
      ['domains', '/domains'],
    ] as const) {
      const r = await latency(
        base,
        key,
        brands.map((b) => `/v1/brands/${b}${suffix}`),
      );
      rows.push({ read: `GET …/${what} (20 brands)`, 'p50 ms': r.p50, 'p99 ms': r.p99, 'req/s': r.rps, 'p99 vs trivial': `${(r.p99 / Math.max(trivial.p99, 1)).toFixed(2)}×` });
    }
    rows.push({ read: 'GET /v1/brands/{id} (trivial, 20 brands)', 'p50 ms': trivial.p50, 'p99 ms': trivial.p99, 'req/s': trivial.rps, 'p99 vs trivial': '1.00×' });
    return rows;
  } finally {
    await stop([child]);
    await cleanup();
  }
}

interface ImapBenchServer {
  server: Server;
  listen(port: number, host: string, done: () => void): void;
  close(done: () => void): void;
}
const hoodiecrow = createRequire(import.meta.url)('hoodiecrow-imap') as (options: object) => ImapBenchServer;

const customerMail = (run: string, n: number) =>
  [
    `From: Customer ${n} <customer${n}@example.net>`,
    'To: desk@acme.example',
    `Subject: Question ${n} about my order`,
    `Message-ID: <bench-${run}-${n}@example.net>`,
    'Date: Thu, 26 Nov 2026 10:00:00 +0000',
    'Content-Type: text/plain; charset=utf-8',
    '',
    `Hello,\r\n\r\nmy order ${n} has not arrived yet. Could you look into it?\r\n\r\nThanks,\r\nCustomer ${n}`,
  ].join('\r\n');

/** A process's CPU seconds from /proc: its own, and its exited children's (a postmaster's: its backends'). */
function cpuSeconds(pid: number): { own: number; children: number } {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const tick = (i: number) => Number(fields[i - 3]) / 100;
  return { own: tick(14) + tick(15), children: tick(16) + tick(17) };
}
const postmasterOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);

/** INGESTED messages taken in by `dispatchers` dispatcher processes: messages per second, start to last ticket. */
async function ingestion(dispatchers: number): Promise<Record<string, string | number>> {
  const run = randomBytes(4).toString('hex');
  const imap = hoodiecrow({
    users: { desk: { password: 'bench' } },
    storage: { INBOX: { messages: Array.from({ length: INGESTED }, (_, i) => ({ raw: customerMail(run, i) })) } },
  });
  await new Promise<void>((resolve) => imap.listen(0, '127.0.0.1', resolve));
  const port = (imap.server.address() as AddressInfo).port;
  const { adminUrl, cleanup } = await adminDatabase({ max_connections: '100' });
  const database = `ticketd_bench_imap_${run}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);
  const env = { TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true', TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '1000' };
  const children: ChildProcess[] = [];
  try {
    const apiProcess = await startTicketd('api', dbUrl, env);
    children.push(apiProcess.child);
    const base: string = apiProcess.info.url;
    const signup = await fetch(`${base}/v1/accounts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: `bench-imap-${run}@example.com` }),
    });
    const key = ((await signup.json()) as { apiKeys: { live: { key: string } } }).apiKeys.live.key;
    const brand = await api(base, key, 'POST', '/v1/brands', { name: 'Inbox' });
    const connection = await api(base, key, 'POST', `/v1/brands/${brand.body.id}/email-connections`, {
      provider: 'IMAP',
      email: 'desk@acme.example',
      host: '127.0.0.1',
      port,
      tls: false,
      username: 'desk',
      password: 'bench',
    });
    if (connection.status !== 201) throw new Error(`connection: ${connection.status} ${JSON.stringify(connection.body)}`);
    // One connection polls the count: the CPU of the database's exited backends is then the servers'.
    const poll = new pg.Client({ connectionString: dbUrl });
    await poll.connect();
    const postmaster = postmasterOf(Number((await poll.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid));
    const databaseCpuBefore = cpuSeconds(postmaster).children;
    const started = performance.now();
    // BENCH_DISPATCHER_NODE_OPTIONS (e.g. `--import` of a profiler): for the dispatchers alone.
    const dispatcherEnv = process.env.BENCH_DISPATCHER_NODE_OPTIONS ? { ...env, NODE_OPTIONS: process.env.BENCH_DISPATCHER_NODE_OPTIONS } : env;
    for (let i = 0; i < dispatchers; i++) children.push((await startTicketd('dispatcher', dbUrl, dispatcherEnv)).child);
    let tickets = 0;
    let first: { at: number; tickets: number } | null = null;
    while (tickets < INGESTED) {
      await new Promise((r) => setTimeout(r, 100));
      tickets = Number((await poll.query<{ n: string }>('select count(*) as n from tickets where brand_id = $1', [brand.body.id])).rows[0]!.n);
      if (tickets && !first) first = { at: performance.now(), tickets };
      if (performance.now() - started > 600_000) throw new Error(`only ${tickets} of ${INGESTED} tickets after 10 minutes`);
    }
    const seconds = (performance.now() - started) / 1000;
    const taking = (performance.now() - first!.at) / 1000;
    const dispatcherCpu = children.slice(1).reduce((sum, c) => sum + cpuSeconds(c.pid!).own, 0);
    await poll.end();
    await stop(children.splice(1));
    // The dispatchers' backends have exited (the API process's are idle and still open).
    const databaseCpu = cpuSeconds(postmaster).children - databaseCpuBefore;
    return {
      dispatchers,
      messages: INGESTED,
      'seconds from start': seconds.toFixed(1),
      'messages/s from start': Math.round(INGESTED / seconds),
      'first ticket after s': ((first!.at - started) / 1000).toFixed(1),
      'messages/s once taking in': Math.round((INGESTED - first!.tickets) / taking),
      'dispatcher CPU ms/message': ((dispatcherCpu * 1000) / INGESTED).toFixed(2),
      'database CPU ms/message': ((databaseCpu * 1000) / INGESTED).toFixed(2),
    };
  } finally {
    await stop(children);
    await new Promise<void>((resolve) => imap.close(() => resolve()));
    await cleanup();
  }
}

export async function runMailBench(): Promise<void> {
  // BENCH_ONLY=ingestion: one dispatcher's ingestion alone, BENCH_TURNS times (a before/after of inbound mail).
  if (process.env.BENCH_ONLY === 'ingestion') {
    const turns: Record<string, string | number>[] = [];
    for (let i = 0; i < Number(process.env.BENCH_TURNS ?? 1); i++) turns.push(await ingestion(1));
    console.log('\nIMAP ingestion: a mailbox of 2,000 messages on loopback, one dispatcher process (start to last ticket):');
    console.table(turns);
    return;
  }
  log('DKIM signing cost…');
  const signing = await signingCost();
  log('the dashboard’s polls over 20 brands…');
  const polls = await dashboardPolls();
  log(`IMAP ingestion of ${INGESTED} messages, one dispatcher, then two…`);
  const ingested = [await ingestion(1), await ingestion(2)];
  console.log('\nDKIM signing (nodemailer, RSA 2048), per message:');
  console.table([signing]);
  console.log('\nThe lists the dashboard polls, next to a trivial authenticated read (4 connections, 5 s each):');
  console.table(polls);
  console.log('\nIMAP ingestion: a mailbox of 2,000 messages on loopback, taken in by dispatcher processes (start to last ticket):');
  console.table(ingested);
}
