import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { buildApp } from '../../server/app.js';
import { mustCreate, ownerWithBrand, testConfig } from '../helpers/app.js';
import { startServer } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { imapConnection, imapServer } from '../helpers/imap.js';
import { until } from '../helpers/wait.js';
import { testNow } from '../helpers/clock.js';

// A dispatcher killed (SIGKILL) in the middle of a mailbox sync, then another one: every message
// becomes one ticket, none twice, none lost.

const MESSAGES = 300;
const { url, db } = await freshDatabase(t);
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-cli-mailbox-crash-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const env = { DATABASE_URL: url, TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true', TICKETD_DATA_DIR: dataDir, TICKETD_DNS_SERVERS: '127.0.0.1:9' };
const app = await buildApp({ clock: testNow, config: testConfig(env), db });
t.teardown(() => app.close());

const message = (n: number) =>
  [`From: Customer ${n} <customer${n}@example.net>`, 'To: desk@acme.example', `Subject: Question ${n}`, `Message-ID: <crash-${n}@example.net>`, '', `Question ${n}.`].join('\r\n');

t.test('kill -9 of the dispatcher mid-sync: the next one takes in the rest, each message exactly once', async (t) => {
  const { port } = await imapServer(
    t,
    Array.from({ length: MESSAGES }, (_, i) => message(i + 1)),
  );
  const { owner, brand, base } = await ownerWithBrand(app);
  const connection = await mustCreate(owner.live, `${base}/email-connections`, imapConnection(port));
  const tickets = async () => Number((await db('tickets').where({ brandId: brand.id }).count({ n: '*' }))[0]!.n);

  const first = startServer(env, ['--role', 'dispatcher']);
  t.teardown(() => void first.child.kill('SIGKILL'));
  t.ok(await first.ready, first.stderr());
  await until('the first dispatcher is taking the mailbox in', async () => (await tickets()) >= 20, 60_000);
  first.child.kill('SIGKILL');
  await first.exited;
  const before = await tickets();
  t.ok(before < MESSAGES, `killed mid-sync (${before} of ${MESSAGES} taken in)`);
  const row = await db('emailConnections').where({ id: connection.id }).first();
  t.equal(row.status, 'SYNCING', 'the crash left the connection syncing');
  t.equal(Number(row.lastUid), before, 'the place saved is exactly what was committed');

  // A sync that has not moved for ten minutes is taken to have died: as if that long had passed.
  await db('emailConnections')
    .where({ id: connection.id })
    .update({ updatedAt: db.raw(`now() - interval '11 minutes'`) });
  const second = startServer(env, ['--role', 'dispatcher']);
  t.teardown(() => void second.child.kill('SIGKILL'));
  t.ok(await second.ready, second.stderr());
  await until('the second dispatcher has taken in the rest', async () => (await tickets()) >= MESSAGES, 90_000);
  second.child.kill('SIGTERM');
  t.equal(await second.exited, 0);

  const created = await db('tickets').where({ brandId: brand.id }).select('sourceId');
  t.equal(created.length, MESSAGES, 'one ticket per message');
  t.equal(new Set(created.map((k) => k.sourceId)).size, MESSAGES, 'none twice');
  t.match(await db('emailConnections').where({ id: connection.id }).first(), { status: 'ACTIVE', lastUid: String(MESSAGES) });
});
