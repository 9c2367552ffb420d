import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { buildApp } from '../../server/app.js';
import { makeBrand, makeTicket, signup, testConfig } from '../helpers/app.js';
import { runCli, type CliResult } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { testNow } from '../helpers/clock.js';

// `ticketd contacts export|erase`: the real bin/ticketd against this file's own database.
const { url, db } = await freshDatabase(t);
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-cli-contacts-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const env = { DATABASE_URL: url, TICKETD_DATA_DIR: dataDir };
const cli = (args: string[]) => runCli(args, env);
const app = await buildApp({ clock: testNow, config: testConfig(env), db });
t.teardown(() => app.close());

function exits(t: Test, res: CliResult, code: number, what: string) {
  t.equal(res.code, code, `${what}: exit ${code}`, { stdout: res.stdout, stderr: res.stderr });
}

const EMAIL = 'ruth.cli@customer.example';
const owner = await signup(app);
const brands = [await makeBrand(owner.live, 'One'), await makeBrand(owner.live, 'Two')];
for (const brand of brands) await makeTicket(owner.live, `/v1/brands/${brand.id}`, { title: 'From Ruth Clifford', customerEmail: EMAIL, customerName: 'Ruth Clifford' });

t.test('export to a file, then erase: refused without --yes off a terminal, done with it', async (t) => {
  const out = path.join(dataDir, 'ruth.json');
  const [help, exported, unconfirmed] = await Promise.all([
    cli(['--help']),
    cli(['contacts', 'export', '--account', owner.accountId, '--email', EMAIL, '--out', out]),
    cli(['contacts', 'erase', '--account', owner.accountId, '--email', EMAIL]),
  ]);
  t.match(help.stdout, /^\s+contacts\b/m, 'help lists contacts');
  exits(t, exported, 0, 'contacts export');
  const doc = JSON.parse(readFileSync(out, 'utf8'));
  t.equal(doc.contacts.length, 2, 'a contact in each brand');
  t.match(doc.contacts[0], { contact: { email: EMAIL, name: 'Ruth Clifford' }, tickets: [{ title: 'From Ruth Clifford' }] });
  exits(t, unconfirmed, 2, 'erase without --yes');
  t.match(unconfirmed.stderr, /--yes/);

  const erased = await cli(['contacts', 'erase', '--account', owner.accountId, '--email', EMAIL, '--yes', '--json']);
  exits(t, erased, 0, 'contacts erase --yes');
  t.equal(erased.json().contacts.length, 2);
  t.match(erased.json().contacts[0], { tombstone: /^ers_/, counts: { tickets: 1 } });
  const left = await db('contacts').where({ account_id: owner.accountId }).whereILike('email', EMAIL).orWhereILike('name', '%Ruth Clifford%');
  t.same(left, [], 'no contact holds the email or the name');
});
