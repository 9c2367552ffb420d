import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import t from 'tap';
import { buildApp } from '../../server/app.js';
import { emptyDir, makeTicket, ownerWithBrand, testConfig } from '../helpers/app.js';
import { BIN, startServer, ticketdEnv } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { testNow } from '../helpers/clock.js';
import { until } from '../helpers/wait.js';

// A dispatcher-only process (`start --role dispatcher`) builds its own services from the
// configuration: a reply queued by the API goes out through the SMTP relay it names.
const { url, db } = await freshDatabase(t);
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-dispatcher-mail-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));

const received: ParsedMail[] = [];
const relay = new SMTPServer({
  authOptional: true,
  disabledCommands: ['AUTH', 'STARTTLS'],
  logger: false,
  onData: (stream, _session, done) => {
    simpleParser(stream).then((parsed) => {
      received.push(parsed);
      done();
    }, done);
  },
});
await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise<void>((resolve) => relay.close(() => resolve())));
const relayPort = (relay.server.address() as AddressInfo).port;

const env = { DATABASE_URL: url, TICKETD_DATA_DIR: dataDir, TICKETD_MAIL_FROM: 'help@dispatch.example' };
const app = await buildApp({ clock: testNow, config: testConfig(env), db });
t.teardown(() => app.close());

t.test('start --role dispatcher sends queued mail with the configured SMTP transport', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const ticket = await makeTicket(owner.live, base, { title: 'Relayed', customerEmail: 'jane@customer.example' });
  const reply = (await owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'Sent by the dispatcher.' })).body;

  const child = spawn('env', ['-u', 'NODE_OPTIONS', process.execPath, BIN, 'start', '--role', 'dispatcher', '--json', '--dispatcher-port', '0'], {
    cwd: emptyDir,
    env: ticketdEnv({ ...env, TICKETD_MAIL_TRANSPORT: 'smtp', TICKETD_MAIL_SMTP_HOST: '127.0.0.1', TICKETD_MAIL_SMTP_PORT: String(relayPort) }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  const end = Date.now() + 30_000;
  while (received.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));

  t.equal(received.length, 1, 'the relay received the reply');
  t.equal(received[0]?.messageId, `<${reply.id}@dispatch.example>`);
  t.equal(received[0]?.from?.value[0]?.address, 'help@dispatch.example');
  t.match(received[0]?.text ?? '', /Sent by the dispatcher\./);
  t.notOk(existsSync(path.join(dataDir, 'mail', 'outbox')), 'nothing went to the file transport');
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'a graceful stop');
});

t.test('start --role dispatcher writes its lines at the configured level: at warn, no line per mail written', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const ticket = await makeTicket(owner.live, base, { title: 'Filed', customerEmail: 'joe@customer.example' });
  const reply = (await owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'Written to a file.' })).body;
  const mailFile = path.join(dataDir, 'mail', 'outbox', `${reply.id}@dispatch.example.eml`);
  const server = startServer({ ...env, TICKETD_LOG_LEVEL: 'warn' }, ['--role', 'dispatcher']);
  t.teardown(() => void server.child.kill('SIGKILL'));
  t.ok(await server.ready, server.stderr());
  await until('the reply written to its file', () => existsSync(mailFile), 30_000);
  server.child.kill('SIGTERM');
  t.equal(await server.exited, 0, 'a graceful stop');
  t.notMatch(server.stderr(), /written to/, 'the file transport line is at info');
});
