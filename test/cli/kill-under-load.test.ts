import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { runCli, startServer } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { receiver } from '../helpers/receiver.js';
import { until } from '../helpers/wait.js';

// A real `ticketd start` killed with SIGKILL in the middle of ticket creates, then a new process
// on the same database: what a client was told exists, every committed ticket's event reaches the
// receiver (a message sent twice carries one webhook-id), and the dead process's claimed messages
// go out within seconds of the new start, not when their leases run out.
const { url, db } = await freshDatabase(t);
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-kill-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
// Webhooks to the loopback receiver; a generous webhook timeout, so the requests left hanging are
// still in flight (and their messages claimed) when the process dies.
const env = { DATABASE_URL: url, TICKETD_DATA_DIR: dataDir, TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true', TICKETD_WEBHOOK_TIMEOUT_MS: '60000' };
const CLIENTS = 8;

interface Created {
  status: number;
  id?: string;
}

t.test('kill -9 under load, then a new process: no acknowledged create lost, every event delivered, recovery in seconds', async (t) => {
  const account = await runCli(['accounts', 'create', '--email', 'ops@example.com', '--brand', 'Ops', '--json'], env);
  t.equal(account.code, 0, 'accounts create', { stderr: account.stderr });
  const { apiKeys, brand } = account.json();
  const call = async (baseUrl: string, route: string, body: unknown, key?: string): Promise<Created> => {
    const res = await fetch(`${baseUrl}${route}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKeys.live.key}`, 'content-type': 'application/json', ...(key ? { 'x-idempotency-key': key } : {}) },
      body: JSON.stringify(body),
    });
    return { status: res.status, id: ((await res.json()) as { id?: string }).id };
  };
  const createTicket = (baseUrl: string, key: string) => call(baseUrl, `/v1/brands/${brand.id}/tickets`, { title: `Load ${key}` }, key);

  // While the first process lives, every fourth request is left hanging: the process dies holding those messages.
  let firstLives = true;
  let requests = 0;
  const never = new Promise<void>(() => undefined);
  const hook = await receiver(t, () => (firstLives && ++requests % 4 === 0 ? { until: never } : {}));

  const first = startServer(env);
  t.teardown(() => first.child.kill('SIGKILL'));
  const firstInfo = await first.ready;
  t.ok(firstInfo, 'the first process started', { stderr: first.stderr() });
  t.equal((await call(firstInfo.url, `/v1/brands/${brand.id}/webhooks`, { url: `${hook.url}/hook`, events: ['ticket.created'] })).status, 201);

  // Clients create tickets, each with its own idempotency key, until the process is killed.
  const acknowledged = new Map<string, string>();
  const unanswered: string[] = [];
  let killed = false;
  const client = async (c: number) => {
    for (let i = 0; !killed; i++) {
      const key = `c${c}-${i}`;
      const res = await createTicket(firstInfo.url, key).catch(() => null);
      if (res?.status === 201) acknowledged.set(key, res.id!);
      else unanswered.push(key); // no answer (killed) or refused: the client tries again later, same key
      if (!res) return;
    }
  };
  const load = Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
  await until('load under way', () => acknowledged.size >= 40 && hook.received.length >= 8, 30_000);
  first.child.kill('SIGKILL');
  killed = true;
  await first.exited;
  await load;
  const orphaned = (await db('outbox').whereNotNull('leaseOwner').whereIn('status', ['pending', 'retrying']).pluck('id')) as string[];
  t.ok(orphaned.length > 0, `the process died holding ${orphaned.length} claimed messages`);

  firstLives = false;
  const second = startServer(env);
  t.teardown(async () => {
    second.child.kill('SIGTERM');
    await second.exited;
  });
  const secondInfo = await second.ready;
  t.ok(secondInfo, 'a new process started on the same database', { stderr: second.stderr() });
  const restartedAt = Date.now();
  // 200: the dead process had committed it (the key replays the ticket); 201: it had not.
  for (const key of unanswered) {
    const res = await createTicket(secondInfo.url, key);
    t.ok([200, 201].includes(res.status), `retried create ${key}: ${res.status}`);
    acknowledged.set(key, res.id!);
  }

  const committed = (await db('tickets').where({ brandId: brand.id }).pluck('id')) as string[];
  const missing = [...acknowledged.values()].filter((id) => !committed.includes(id));
  t.same(missing, [], `all ${acknowledged.size} acknowledged creates exist`);
  t.equal(new Set(acknowledged.values()).size, committed.length, 'and nothing else: a retried key did not create a second ticket');

  const deliveredTickets = () => new Set(hook.received.map((r) => (JSON.parse(r.body) as { data: { id: string } }).data.id));
  const sentAfterRestart = () => new Set(hook.received.filter((r) => r.at >= restartedAt).map((r) => String(r.headers['webhook-id'])));
  await until(
    "every committed ticket's event, the dead process's claimed ones sent again",
    () => {
      const [delivered, sent] = [deliveredTickets(), sentAfterRestart()];
      return committed.every((id) => delivered.has(id)) && orphaned.every((id) => sent.has(id));
    },
    15_000,
  );
  const [delivered, sent] = [deliveredTickets(), sentAfterRestart()];
  t.same(
    committed.filter((id) => !delivered.has(id)),
    [],
    "every committed ticket's ticket.created event arrived",
  );
  t.same(
    orphaned.filter((id) => !sent.has(id)),
    [],
    "the dead process's claimed messages were sent within seconds of the new start",
  );
  const webhookIds = new Map<string, Set<string>>();
  for (const r of hook.received) {
    const event = (JSON.parse(r.body) as { id: string }).id;
    webhookIds.set(event, (webhookIds.get(event) ?? new Set()).add(String(r.headers['webhook-id'])));
  }
  t.equal(webhookIds.size, committed.length, 'one event per ticket');
  t.same(
    [...webhookIds].filter(([, ids]) => ids.size > 1),
    [],
    `an event sent more than once (${hook.received.length - webhookIds.size} repeats) always carries the same webhook-id`,
  );
});
