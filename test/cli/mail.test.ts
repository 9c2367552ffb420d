import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { simpleParser } from 'mailparser';
import t from 'tap';
import { runCli } from '../helpers/cli.js';

// `ticketd mail send-test` through the real binary, with the default file transport (no database needed).
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-mail-cli-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const env = { TICKETD_DATA_DIR: dataDir, TICKETD_MAIL_FROM: 'support@acme.example' };

t.test('send-test writes a parsable .eml and says where', async (t) => {
  const res = await runCli(['mail', 'send-test', 'Ops@Example.com', '--json'], env);
  t.equal(res.code, 0, 'exit 0', { stderr: res.stderr });
  const out = res.json();
  t.match(out, { transport: 'file', messageId: /^<test\.[^@]+@acme\.example>$/ });
  t.equal(path.dirname(out.path), path.join(dataDir, 'mail', 'outbox'));
  t.same(readdirSync(path.dirname(out.path)), [path.basename(out.path)]);
  const parsed = await simpleParser(readFileSync(out.path));
  t.equal(parsed.messageId, out.messageId);
  t.equal(parsed.from?.value[0]?.address, 'support@acme.example');
  t.equal((parsed.to as { value: { address: string }[] }).value[0]?.address, 'ops@example.com');
  t.match(res.stderr, out.path, 'one log line names the file');

  const human = await runCli(['mail', 'send-test', 'ops@example.com'], env);
  t.equal(human.code, 0);
  t.match(human.stdout, /^written <test\..+> to .+\.eml$/m);
});

t.test('send-test refuses what is not an address (usage error)', async (t) => {
  const res = await runCli(['mail', 'send-test', 'not-an-address'], env);
  t.equal(res.code, 2);
  t.match(res.stderr, /not an email address/);
  const missing = await runCli(['mail', 'send-test'], env);
  t.equal(missing.code, 2);
});
