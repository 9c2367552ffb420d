import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { buildApp } from '../../server/app.js';
import { makeTicket, mustCreate, ownerWithBrand, testConfig } from '../helpers/app.js';
import { runCli } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { testNow } from '../helpers/clock.js';

// `ticketd rules export|apply`, through the real binary: a brand's rules kept in a file, applied
// to another brand, dry run first, then for real, then again with nothing left to do. Seven spawns.
const { url, db } = await freshDatabase(t);
const env = { DATABASE_URL: url };
const app = await buildApp({ clock: testNow, config: testConfig(env), db });
t.teardown(() => app.close());
const dir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-rules-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

t.test('export, apply --dry-run, apply, apply again: the second brand ends up with the first one’s rules', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  await mustCreate(owner.live, `${base}/triggers`, {
    name: 'VIP',
    on: ['ticket.created'],
    conditions: { all: [{ field: 'customerDomain', operator: 'is', value: 'vip.example' }] },
    actions: [{ type: 'set_priority', value: 'urgent' }],
  });
  await mustCreate(owner.live, `${base}/triggers`, { name: 'Tag all', on: ['ticket.created'], conditions: {}, actions: [{ type: 'add_tags', value: ['new'] }] });
  await mustCreate(owner.live, `${base}/automations`, {
    name: 'Close resolved',
    conditions: {
      all: [
        { field: 'status', operator: 'is', value: 'resolved' },
        { field: 'hoursSinceResolved', operator: 'gte', value: 96 },
      ],
    },
    actions: [{ type: 'set_status', value: 'closed' }],
  });
  await mustCreate(owner.live, `${base}/macros`, {
    name: 'Thanks',
    visibility: 'brand',
    actions: [{ type: 'set_status', value: 'resolved' }],
    comment: { body: 'Thanks {{ customer.name }}!' },
  });
  await mustCreate(owner.live, `${base}/views`, { name: 'Urgent and unassigned', visibility: 'brand', filters: { priority: 'urgent', assigneeId: 'unassigned' } });

  const file = path.join(dir, 'rules.json');
  const exported = await runCli(['rules', 'export', brand.id, '--file', file], env);
  t.equal(exported.code, 0, { stderr: exported.stderr });
  const doc = JSON.parse(readFileSync(file, 'utf8'));
  t.same(
    doc.triggers.map((r: { name: string }) => r.name),
    ['VIP', 'Tag all'],
    'triggers in the order they run',
  );
  t.match(doc, {
    version: 1,
    automations: [{ name: 'Close resolved' }],
    macros: [{ name: 'Thanks', comment: { body: 'Thanks {{ customer.name }}!' } }],
    views: [{ name: 'Urgent and unassigned' }],
  });
  t.notMatch(JSON.stringify(doc), /"id"|rule_|mac_|view_/, 'no ids of its own');

  const target = await mustCreate(owner.live, '/v1/brands', { name: 'Second', slug: `second-${process.pid}` });
  const targetBase = `/v1/brands/${target.id}`;
  await mustCreate(owner.live, `${targetBase}/triggers`, { name: 'Tag all', on: ['ticket.created'], conditions: {}, actions: [{ type: 'add_tags', value: ['old'] }] });
  await mustCreate(owner.live, `${targetBase}/triggers`, { name: 'Local only', on: ['ticket.updated'], conditions: {}, actions: [{ type: 'mark_spam' }] });

  const dry = await runCli(['rules', 'apply', target.id, file, '--dry-run'], env);
  t.equal(dry.code, 0, { stderr: dry.stderr });
  t.match(dry.stdout, /\(dry run\) added trigger "VIP"/);
  t.match(dry.stdout, /\(dry run\) changed trigger "Tag all"/);
  t.match(dry.stdout, /4 would be added, 1 would be changed, 0 would be removed, 0 unchanged \(dry run: nothing written\)/);
  t.same(
    (await owner.live('GET', `${targetBase}/triggers`)).body.data.map((r: { name: string }) => r.name),
    ['Tag all', 'Local only'],
    'the dry run wrote nothing',
  );

  const applied = await runCli(['rules', 'apply', `ws_${target.id.slice(3)}`, file, '--prune', '--json'], env);
  t.equal(applied.code, 0, { stderr: applied.stderr });
  t.match(applied.json(), {
    dryRun: false,
    added: [
      { kind: 'triggers', name: 'VIP' },
      { kind: 'automations', name: 'Close resolved' },
      { kind: 'macros', name: 'Thanks' },
      { kind: 'views', name: 'Urgent and unassigned' },
    ],
    changed: [{ kind: 'triggers', name: 'Tag all' }],
    removed: [{ kind: 'triggers', name: 'Local only' }],
    unchanged: 0,
  });
  t.same(
    (await owner.live('GET', `${targetBase}/triggers`)).body.data.map((r: { name: string }) => r.name),
    ['VIP', 'Tag all'],
    'the document’s order',
  );
  const ticket = await makeTicket(owner.live, targetBase, { title: 'Down', customerEmail: 'boss@vip.example' });
  t.match(ticket, { priority: 'urgent', tags: [{ name: 'new' }] }, 'the applied rules run');

  const again = await runCli(['rules', 'apply', target.id, file, '--prune'], env);
  t.equal(again.code, 0, { stderr: again.stderr });
  t.equal(again.stdout.trim(), '0 added, 0 changed, 0 removed, 5 unchanged', 'a second apply changes nothing');
  t.same(JSON.parse((await runCli(['rules', 'export', target.id], env)).stdout), doc, 'both brands export the same document');
});

t.test('a document naming what the brand lacks refuses the whole apply; a malformed one is named', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const file = path.join(dir, 'bad.json');
  writeFileSync(
    file,
    JSON.stringify({
      version: 1,
      triggers: [
        { name: 'Fine', on: ['ticket.created'], conditions: {}, actions: [{ type: 'add_tags', value: ['x'] }] },
        { name: 'Broken', on: ['ticket.created'], conditions: {}, actions: [{ type: 'set_status', value: 'no_such_status' }] },
      ],
    }),
  );
  const refused = await runCli(['rules', 'apply', brand.id, file, '--json'], env);
  t.equal(refused.code, 1);
  t.match(refused.json(), { error: { code: 'invalid_rule', message: /^triggers\[1\] "Broken": actions\[0\]\.value: no_such_status is not a status of this brand/ } });
  t.same((await owner.live('GET', `${base}/triggers`)).body.data, [], 'nothing applied, not even the fine one');

  writeFileSync(file, JSON.stringify({ version: 1, triggers: [{ name: 'x', on: ['ticket.created'], conditions: {}, actions: [{ type: 'explode' }] }] }));
  const malformed = await runCli(['rules', 'apply', brand.id, file], env);
  t.equal(malformed.code, 1);
  t.match(malformed.stderr, /The rules document is not valid: triggers\.0\.actions\.0/);
});
