import t from 'tap';
import { buildApp } from '../../server/app.js';
import { testConfig } from '../helpers/app.js';
import { runCli } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { dnsServer } from '../helpers/dns.js';
import { imapServer, PASSWORD } from '../helpers/imap.js';
import { testNow } from '../helpers/clock.js';

// `ticketd domains …` and `ticketd mailboxes …`, through the real binary: for operators without the dashboard.
const dns = await dnsServer(t);
const { url, db } = await freshDatabase(t);
const env = { DATABASE_URL: url, TICKETD_DNS_SERVERS: dns.address, TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true' };
const app = await buildApp({ clock: testNow, config: testConfig(env), db });
t.teardown(() => app.close());
const account = await runCli(['accounts', 'create', '--email', 'mail-admin@example.com', '--brand', 'Desk', '--json'], env);
const brandId = (account.json() as { brand: { id: string } }).brand.id;

t.test('domains add, list, verify: the records to publish, then verified once they are', async (t) => {
  const added = await runCli(['domains', 'add', brandId, 'Mail.Example.COM', '--json'], env);
  t.equal(added.code, 0, 'exit 0', { stderr: added.stderr });
  const domain = added.json() as { id: string; domain: string; isPrimary: boolean; records: { type: string; name: string; value: string; purpose: string }[] };
  t.match(domain, { domain: 'mail.example.com', isPrimary: true });

  const failed = await runCli(['domains', 'verify', brandId, 'mail.example.com'], env);
  t.equal(failed.code, 1, 'exit 1 while the records are missing');
  t.match(failed.stdout, /mail\.example\.com is not verified: Not verified: the TXT record .*_domainkey\.mail\.example\.com/);

  for (const r of domain.records) if (r.type !== 'MX') dns.publish(r.name, { type: r.type as 'TXT' | 'CNAME', value: r.value });
  const verified = await runCli(['domains', 'verify', brandId, domain.id, '--json'], env);
  t.equal(verified.code, 0, { stderr: verified.stderr });
  t.match(verified.json(), { verified: true, domain: { id: domain.id, verified: true } });

  const listed = await runCli(['domains', 'list', brandId], env);
  t.match(listed.stdout, new RegExp(`${domain.id}\\s+mail\\.example\\.com\\s+OUTBOUND\\s+true\\s+true`));
  const bad = await runCli(['domains', 'add', brandId, 'not a domain'], env);
  t.equal(bad.code, 1);
  t.match(bad.stderr, /domain must be a bare domain name/);
  t.equal((await runCli(['domains', 'list', 'br_nosuchbrand00000000000000'], env)).code, 1, 'an unknown brand fails');
});

t.test('mailboxes add and list: the password from the environment, never printed', async (t) => {
  const added = await runCli(['mailboxes', 'add', brandId, '--email', 'support@example.com', '--host', '127.0.0.1', '--port', '3993', '--json'], {
    ...env,
    TICKETD_MAILBOX_PASSWORD: 'app-password-cli',
  });
  t.equal(added.code, 0, { stderr: added.stderr });
  t.match(added.json(), { email: 'support@example.com', host: '127.0.0.1', port: 3993, tls: true, isPrimary: true, passwordSet: true, status: 'ACTIVE' });
  t.notMatch(added.stdout, /app-password-cli/);
  const listed = await runCli(['mailboxes', 'list', brandId], env);
  t.match(listed.stdout, /support@example\.com\s+127\.0\.0\.1\s+3993\s+ACTIVE\s+true/);
  t.notMatch(listed.stdout, /app-password-cli/);
  const noPassword = await runCli(['mailboxes', 'add', brandId, '--email', 'x@example.com', '--host', '127.0.0.1'], env);
  t.equal(noPassword.code, 2, 'a usage error without a password and no terminal to ask on');
  t.match(noPassword.stderr, /missing --password \(or TICKETD_MAILBOX_PASSWORD/);
  t.equal((await runCli(['mailboxes', 'add', brandId, '--email', 'x@example.com', '--host', '127.0.0.1', '--port', 'abc', '--password', 'p'], env)).code, 2);
});

t.test("mailboxes test and sync: read without changing anything, then take the mail in; a wrong password fails with the server's words", async (t) => {
  const mail = (n: number) =>
    [`From: Customer <c${n}@example.net>`, 'To: desk@example.com', `Subject: Question ${n}`, `Message-ID: <cli-q${n}@example.net>`, '', `Question ${n}.`].join('\r\n');
  const { port, inbox } = await imapServer(t, [mail(1), mail(2)]);
  const added = await runCli(
    ['mailboxes', 'add', brandId, '--email', 'desk@example.com', '--host', '127.0.0.1', '--port', String(port), '--no-tls', '--username', 'desk', '--json'],
    {
      ...env,
      TICKETD_MAILBOX_PASSWORD: PASSWORD,
    },
  );
  t.equal(added.code, 0, { stderr: added.stderr });
  const connection = added.json() as { id: string };

  const tested = await runCli(['mailboxes', 'test', brandId, connection.id, '--json'], env);
  t.equal(tested.code, 0, { stderr: tested.stderr });
  t.same(tested.json(), { success: true, waiting: 2 });
  t.notOk(
    inbox().some((m) => m.flags.includes('\\Seen')),
    'testing changes nothing',
  );

  const synced = await runCli(['mailboxes', 'sync', brandId], env);
  t.equal(synced.code, 0, { stderr: synced.stderr });
  t.match(synced.stdout, /^2 ticket\(s\) created/);
  t.equal(Number((await db('tickets').where({ brandId }).count({ n: '*' }))[0]!.n), 2);
  t.same((await runCli(['mailboxes', 'test', brandId, connection.id, '--json'], env)).json(), { success: true, waiting: 0 });

  await db('emailConnections').where({ id: connection.id }).update({ username: 'nobody' });
  const refused = await runCli(['mailboxes', 'sync', brandId, '--connection', connection.id], env);
  t.equal(refused.code, 1);
  t.match(refused.stdout, /the mailbox cannot be read: .+/);
  t.match((await db('emailConnections').where({ id: connection.id }).first()).status, 'DISCONNECTED');
});
