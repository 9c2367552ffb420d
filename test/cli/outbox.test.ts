import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { buildApp } from '../../server/app.js';
import { makeTicket, ownerWithBrand, testConfig } from '../helpers/app.js';
import { BIN, runCli, ticketdEnv, type CliResult } from '../helpers/cli.js';
import { emptyDir } from '../helpers/app.js';
import { freshDatabase } from '../helpers/db.js';
import { receiver } from '../helpers/receiver.js';
import { testNow } from '../helpers/clock.js';

// The real bin/ticketd against this file's own database; the app creates the data it works on.
const { url, db } = await freshDatabase(t);
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-cli-outbox-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const env = { DATABASE_URL: url, TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true', TICKETD_DATA_DIR: dataDir };
const cli = (args: string[]) => runCli(args, env);
const app = await buildApp({ clock: testNow, config: testConfig(env), db });
t.teardown(() => app.close());

function exits(t: Test, res: CliResult, code: number, what: string) {
  t.equal(res.code, code, `${what}: exit ${code}`, { stdout: res.stdout, stderr: res.stderr });
}

const hook = await receiver(t, (r) => (r.path === '/reject' ? { status: 400, body: 'bad' } : {}));
const { owner, base } = await ownerWithBrand(app);
const good = (await owner.live('POST', `${base}/webhooks`, { url: `${hook.url}/accept`, events: ['ticket.created'] })).body;
const bad = (await owner.live('POST', `${base}/webhooks`, { url: `${hook.url}/reject`, events: ['ticket.created'] })).body;
const ticket = await makeTicket(owner.live, base, { title: 'Via the CLI', customerEmail: 'jane@customer.example' });
// A public agent reply: one mail message, written by the default file transport.
const reply = (await owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'On it.' })).body;
const eml = path.join(dataDir, 'mail', 'outbox', `${reply.id}@ticketd.localhost.eml`);

t.test('help lists the commands', async (t) => {
  const help = await cli(['--help']);
  for (const command of ['outbox', 'webhooks']) t.match(help.stdout, new RegExp(`^\\s+${command}\\b`, 'm'), `help lists ${command}`);
  const outboxHelp = await cli(['outbox', '--help']);
  for (const sub of ['stats', 'list', 'retry', 'purge']) t.match(outboxHelp.stdout, new RegExp(`^\\s+${sub}\\b`, 'm'));
});

t.test('stats before delivery', async (t) => {
  const res = await cli(['outbox', 'stats', '--json']);
  exits(t, res, 0, 'outbox stats');
  t.same(res.json().counts, [
    { kind: 'mail', status: 'pending', count: 1 },
    { kind: 'webhook', status: 'pending', count: 2 },
  ]);
  t.type(res.json().oldestPendingAgeSeconds, 'number');
  const human = await cli(['outbox', 'stats']);
  t.match(human.stdout, /webhook\s+pending\s+2/);
  t.match(human.stdout, /mail\s+pending\s+1/);
});

t.test('start --role dispatcher delivers alone and stops on SIGTERM', async (t) => {
  const child = spawn('env', ['-u', 'NODE_OPTIONS', process.execPath, BIN, 'start', '--role', 'dispatcher', '--json', '--dispatcher-port', '0'], {
    cwd: emptyDir,
    env: ticketdEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout.on('data', (d) => {
    stdout += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  const end = Date.now() + 30_000;
  while ((hook.received.length < 2 || !existsSync(eml)) && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  t.equal(hook.received.length, 2, 'both deliveries were made');
  t.ok(existsSync(eml), 'the mail was written under the data directory');
  t.equal(JSON.parse(stdout.split('\n')[0]!).role, 'dispatcher');
  t.equal((await fetch(`${JSON.parse(stdout.split('\n')[0]!).url}/v1/health`).catch(() => null))?.status, undefined, 'no API in this role');
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'a graceful stop');
});

t.test('list, retry, deliveries', async (t) => {
  const failed = await cli(['outbox', 'list', '--status', 'failed', '--json']);
  exits(t, failed, 0, 'outbox list --status failed');
  t.equal(failed.json().length, 1);
  const row = failed.json()[0];
  t.match(row, { kind: 'webhook', event: 'ticket.created', status: 'failed', attempts: 1, webhookId: bad.id, lastError: 'HTTP 400' });

  const retried = await cli(['outbox', 'retry', row.id, '--json']);
  exits(t, retried, 0, 'outbox retry');
  t.match(retried.json(), { id: row.id, status: 'pending', attempts: 0 });
  const again = await cli(['outbox', 'retry', row.id, '--json']);
  exits(t, again, 1, 'retrying a pending message');
  t.match(again.json(), { error: { code: 'not_retryable' } });
  exits(t, await cli(['outbox', 'retry', 'dlv_00000000000000000000000000', '--json']), 1, 'an unknown message');
  exits(t, await cli(['outbox', 'list', '--status', 'lost']), 2, 'an unknown status');
  exits(t, await cli(['outbox', 'list', '--limit', '0']), 2, 'a bad limit');

  const deliveries = await cli(['webhooks', 'deliveries', good.id, '--json']);
  exits(t, deliveries, 0, 'webhooks deliveries');
  t.match(deliveries.json(), [{ webhookId: good.id, state: 'success', status: 'SUCCESS', responseCode: 200, attempts: 1 }]);
  const human = await cli(['webhooks', 'deliveries', bad.id]);
  t.match(human.stdout, /pending/);
  exits(t, await cli(['webhooks', 'deliveries', 'wh_00000000000000000000000000']), 1, 'an unknown webhook');
});

t.test('purge wants --yes and a duration, and keeps what is still to deliver', async (t) => {
  exits(t, await cli(['outbox', 'purge', '--older-than', '0s']), 2, 'without --yes');
  exits(t, await cli(['outbox', 'purge', '--older-than', 'soon', '--yes']), 2, 'a bad duration');
  exits(t, await cli(['outbox', 'purge', '--yes']), 2, 'without --older-than');
  const kept = await cli(['outbox', 'purge', '--older-than', '1d', '--yes', '--json']);
  t.same(kept.json(), { purged: 0 }, 'nothing that old');
  const purged = await cli(['outbox', 'purge', '--older-than', '0s', '--yes', '--json']);
  exits(t, purged, 0, 'purge');
  t.same(purged.json(), { purged: 2 }, 'the delivered webhook message and mail');
  t.same((await cli(['outbox', 'stats', '--json'])).json().counts, [{ kind: 'webhook', status: 'pending', count: 1 }], 'the pending one stays');
});
