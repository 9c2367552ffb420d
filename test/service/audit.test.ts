import t from 'tap';
import { systemCtx, tenantCtx, withTx, type TenantCtx } from '../../server/core/context.js';
import * as apiKeys from '../../server/domains/api-keys/service.js';
import * as audit from '../../server/core/audit.js';
import * as tickets from '../../server/domains/tickets/service.js';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { freshDatabase, urlFor } from '../helpers/db.js';
import { createBrand, deleteBrand } from '../../server/flows/brands.js';
import { createAccount } from '../../server/flows/accounts.js';
import { servicesOf } from '../helpers/app.js';
import { updateTicket } from '../../server/flows/ticket-update.js';
import { createTicket } from '../../server/flows/ticket-create.js';
import { testNow } from '../helpers/clock.js';

const { db, name } = await freshDatabase(t);

async function setup(): Promise<{ ctx: TenantCtx; brandId: string; accountId: string }> {
  const created = await createAccount(systemCtx(servicesOf(db)), { email: `audit-${Math.random().toString(36).slice(2)}@example.com` });
  const base = tenantCtx(systemCtx(servicesOf(db)), created.account.id, true);
  const ctx: TenantCtx = { ...base, actor: { type: 'api', id: 'key_test', name: 'CI key' }, requestId: 'req_abc' };
  const brand = await createBrand(ctx, { name: 'Audited' });
  return { ctx, brandId: brand.id, accountId: created.account.id };
}

t.test('create, update and delete of a ticket each leave one entry with the actor, the request and the changes', async (t) => {
  const { ctx, brandId } = await setup();
  const { ticket } = await createTicket(ctx, brandId, { title: 'Printer on fire' });
  await updateTicket(ctx, brandId, ticket.id, { priority: 'urgent', title: 'Printer on fire' });
  await updateTicket(ctx, brandId, ticket.id, { priority: 'urgent' }); // no change: no entry
  await tickets.remove(ctx, brandId, ticket.id);
  const entries = await audit.forEntity(ctx, 'ticket', ticket.id);
  t.same(
    entries.map((e) => e.event),
    ['ticket.created', 'ticket.updated', 'ticket.deleted'],
  );
  t.match(entries[0], { brandId, performerType: 'api', performerId: 'key_test', performerName: 'CI key', requestId: 'req_abc', metadata: { title: 'Printer on fire' } });
  t.same(entries[1]!.changes, [{ field: 'priority', from: null, to: 'urgent' }], 'only the field that really changed');
  t.match(entries[2]!.metadata, { ticketNumber: ticket.ticketNumber });
  t.same(
    (await audit.forTicket(ctx, ticket.id)).map((e) => e.id),
    entries.map((e) => e.id),
    'the ticket history has them too',
  );
});

t.test('a change that rolls back leaves no entry', async (t) => {
  const { ctx, brandId } = await setup();
  let ticketId = '';
  await t.rejects(
    withTx(ctx, async (tx) => {
      ticketId = (await createTicket(tx, brandId, { title: 'Never happened' })).ticket.id;
      throw new Error('rollback');
    }),
    /rollback/,
  );
  t.ok(ticketId, 'the ticket was created inside the transaction');
  t.same(await audit.forEntity(ctx, 'ticket', ticketId), []);
});

t.test('recording outside a transaction is a programming error', async (t) => {
  const { ctx, brandId } = await setup();
  await t.rejects(audit.record(ctx, { brandId, entityType: 'ticket', entityId: 'tkt_x', event: 'ticket.created' }), /inside the change's transaction/);
});

t.test('entries are append-only, yet go with their account', async (t) => {
  const { ctx, brandId, accountId } = await setup();
  await createTicket(ctx, brandId, { title: 'Kept' });
  const direct = async (sql: string) => {
    const client = new pg.Client({ connectionString: urlFor(name) });
    await client.connect();
    try {
      return await client.query(sql, [accountId]);
    } finally {
      await client.end();
    }
  };
  await t.rejects(direct("update audit_log set event = 'x' where account_id = $1"), /append-only/);
  await t.rejects(direct('delete from audit_log where account_id = $1'), /append-only/);
  // A person's erasure may replace their data in an entry, and nothing else of it.
  const redacting = (sql: string) => direct(`with on_ as (select set_config('ticketd.redacting_audit', 'on', false)) ${sql}`);
  await t.rejects(direct(`update audit_log set metadata = '{}' where account_id = $1`), /append-only/, 'not without saying it is the redaction');
  await t.rejects(redacting(`update audit_log set event = 'x', metadata = '{}' from on_ where account_id = $1`), /append-only/, 'never what happened');
  await t.rejects(redacting(`update audit_log set performer_id = 'x' from on_ where account_id = $1`), /append-only/, 'nor who did it');
  t.ok((await redacting(`update audit_log set metadata = '{}', changes = '[]', performer_name = 'x' from on_ where account_id = $1`)).rowCount, 'the person’s data may go');
  await direct('delete from accounts where id = $1');
  const left = await direct('select count(*)::int as n from audit_log where account_id = $1');
  t.equal(left.rows[0].n, 0, 'deleting the account took its entries');
});

t.test("no statement of ticketd updates or deletes entries but a person's erasure (on Citus, where the trigger cannot be, this is the rule)", async (t) => {
  const root = path.join(import.meta.dirname, '../../../server');
  const offending: string[] = [];
  const files = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts') || f.endsWith('.js'));
  t.ok(files.length > 50, 'the sources are read');
  for (const file of files) {
    const text = readFileSync(path.join(root, file), 'utf8');
    const lines = text.split('\n');
    lines.forEach((line, i) => {
      if (/(update|delete\s+from)\s+audit_log\b|\(['"]auditLog['"]\)[^;]*\.(update|delete|del|patch)\(|AuditEntry\b[^;]*\.(update|delete|del|patch)\(/i.test(line))
        offending.push(`${file}:${i + 1}`);
    });
  }
  t.same(
    offending.map((at) => at.replace(/:\d+$/, '')),
    [path.join('flows', 'personal-data.ts')],
    "the erasure's redaction alone (it keeps each entry's facts: migration 20261204020000)",
  );
});

t.test("keys changed by other operations: a rotation with grace, its expiry by the clock, a deleted brand leaving a key's scope", async (t) => {
  const { ctx, brandId } = await setup();
  const limited = await apiKeys.create(ctx, { name: 'Limited', brandIds: [brandId] });
  const { newKey } = await apiKeys.rotate(ctx, limited.id, 5);
  await db('apiKeys')
    .where({ id: limited.id })
    .update({ expiresAt: new Date(testNow() - 1000) });
  t.equal(await apiKeys.revokeExpired(systemCtx(servicesOf(db), 'dispatcher')), 1);
  const old = await audit.forEntity(ctx, 'api_key', limited.id);
  t.same(
    old.map((e) => e.event),
    ['api_key.created', 'api_key.updated', 'api_key.revoked'],
  );
  t.equal(old[1]!.changes[0]!.field, 'expiresAt', 'the grace period is the change');
  t.match(old[1]!.metadata, { rotatedTo: newKey.id });
  t.match(old[2], { performerType: 'system', performerName: 'dispatcher', source: 'system', metadata: { reason: 'rotation_grace_ended' } }, 'the clock revoked it');

  await deleteBrand(ctx, brandId, true);
  const scoped = await audit.forEntity(ctx, 'api_key', newKey.id);
  t.same(
    scoped.map((e) => e.event),
    ['api_key.created', 'api_key.updated'],
  );
  t.same(scoped[1]!.changes, [{ field: 'brandIds', from: [brandId], to: [] }], "the deleted brand left the key's scope");
  t.match(scoped[1]!.metadata, { reason: 'brand_deleted' });
  t.same(
    (await audit.forEntity(ctx, 'brand', brandId)).map((e) => e.event),
    ['brand.created', 'brand.deleted'],
    "the brand's history outlives it",
  );
});
