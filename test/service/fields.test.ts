import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import * as fields from '../../server/domains/fields/service.js';
import * as statuses from '../../server/domains/statuses/service.js';
import { freshDatabase } from '../helpers/db.js';
import { createBrand } from '../../server/flows/brands.js';
import { createAccount } from '../../server/flows/accounts.js';
import { servicesOf } from '../helpers/app.js';
import { putTicketSchema } from '../../server/flows/ticket-schema.js';

const { db } = await freshDatabase(t);
let seq = 0;

async function setup() {
  const created = await createAccount(systemCtx(servicesOf(db)), { email: `svc-${++seq}@example.com` });
  const ctx = tenantCtx(systemCtx(servicesOf(db)), created.account.id, true);
  const brand = await createBrand(ctx, { name: `Brand ${seq}` });
  return { ctx, brand };
}

/** The 400 a validation throws, as { code, fields }. */
async function failure(promise: Promise<unknown>): Promise<{ status?: number; code?: string; fields: string[] }> {
  try {
    await promise;
    return { fields: [] };
  } catch (err) {
    const e = err as { statusCode?: number; code?: string; errors?: { field: string }[] };
    return { status: e.statusCode, code: e.code, fields: (e.errors ?? []).map((x) => x.field).sort() };
  }
}

t.test('without a schema or ticket fields, any customFields are accepted', async (t) => {
  const { ctx, brand } = await setup();
  await t.resolves(fields.validateCustomFields(ctx, brand.id, { anything: [1, { deep: true }] }));
  await t.resolves(fields.validateCustomFields(ctx, brand.id, undefined));
  await fields.create(ctx, brand.id, 'customer', { key: 'vip', label: 'VIP', type: 'boolean', required: true });
  await t.resolves(fields.validateCustomFields(ctx, brand.id, {}), 'customer fields do not constrain tickets');
  t.same((await failure(fields.validateFieldValues(ctx, brand.id, 'contact', {}, 'metadata'))).fields, ['metadata.vip'], 'but they constrain customers');
});

t.test('the hand-written schema rejects bad customFields, naming each path', async (t) => {
  const { ctx, brand } = await setup();
  await putTicketSchema(ctx, brand.id, {
    schema: {
      type: 'object',
      properties: {
        orderId: { type: 'string', minLength: 3 },
        address: { type: 'object', properties: { zip: { type: 'string', pattern: '^[0-9]{5}$' } }, required: ['zip'] },
        count: { type: 'integer', minimum: 0 },
      },
      required: ['orderId'],
    },
  });
  await t.resolves(fields.validateCustomFields(ctx, brand.id, { orderId: 'A-100', address: { zip: '12345' }, count: 2, extra: 'ok' }));
  const bad = await failure(fields.validateCustomFields(ctx, brand.id, { orderId: 'A', address: { zip: 'abc' }, count: -1 }));
  t.equal(bad.status, 400);
  t.equal(bad.code, 'invalid_custom_fields');
  t.same(bad.fields, ['customFields.address.zip', 'customFields.count', 'customFields.orderId']);
  t.same(
    (await failure(fields.validateCustomFields(ctx, brand.id, { address: {} }))).fields,
    ['customFields.address.zip', 'customFields.orderId'],
    'missing required values are named',
  );
  t.same((await failure(fields.validateCustomFields(ctx, brand.id, 'text'))).fields, ['customFields'], 'a non-object is named as a whole');
  t.same((await failure(fields.validateCustomFields(ctx, brand.id, undefined))).fields, ['customFields.orderId'], 'absent customFields count as {}');
});

t.test('ticket field definitions generate the effective schema, merged with the hand-written one', async (t) => {
  const { ctx, brand } = await setup();
  const def = (key: string, type: string, extra: Record<string, unknown> = {}) => fields.create(ctx, brand.id, 'ticket', { key, label: key, type: type as 'text', ...extra });
  await def('plan', 'select', { options: ['free', 'pro'], required: true });
  await def('seats', 'number');
  await def('trial', 'boolean');
  await def('renewal', 'date');
  await def('site', 'url');
  await def('addons', 'multiselect', { options: ['sso', 'audit'] });
  await def('labels', 'array');
  await def('extra', 'object');
  await def('note', 'text');

  const good = { plan: 'pro', seats: 3.5, trial: false, renewal: '2026-12-01', site: 'https://example.com', addons: ['sso'], labels: ['a', 'b'], extra: { a: 1 }, note: 'hi' };
  await t.resolves(fields.validateCustomFields(ctx, brand.id, good));
  await t.resolves(
    fields.validateCustomFields(ctx, brand.id, { plan: 'free', renewal: '2026-12-01T10:00:00Z', seats: null, note: null }),
    'optional fields may be null; date-times are dates',
  );
  const bad = await failure(
    fields.validateCustomFields(ctx, brand.id, {
      plan: 'gold',
      seats: 'three',
      trial: 'yes',
      renewal: 'tomorrow',
      site: 'example.com',
      addons: ['sso', 'fax'],
      labels: [1],
      extra: 'x',
      note: 5,
    }),
  );
  t.equal(bad.code, 'invalid_custom_fields');
  t.same(bad.fields, [
    'customFields.addons.1',
    'customFields.extra',
    'customFields.labels.0',
    'customFields.note',
    'customFields.plan',
    'customFields.renewal',
    'customFields.seats',
    'customFields.site',
    'customFields.trial',
  ]);
  t.same((await failure(fields.validateCustomFields(ctx, brand.id, { plan: null }))).fields, ['customFields.plan'], 'a required field may not be null');
  t.same((await failure(fields.validateCustomFields(ctx, brand.id, {}))).fields, ['customFields.plan'], 'nor missing');

  // Both sources apply: the hand-written schema adds its own rule.
  await putTicketSchema(ctx, brand.id, { type: 'object', properties: { seats: { type: 'number', maximum: 10 } }, required: ['seats'] });
  t.same((await failure(fields.validateCustomFields(ctx, brand.id, { plan: 'pro', seats: 50 }))).fields, ['customFields.seats'], 'the hand-written maximum applies');
  t.same((await failure(fields.validateCustomFields(ctx, brand.id, { seats: 5 }))).fields, ['customFields.plan'], 'the required definition applies');
  await t.resolves(fields.validateCustomFields(ctx, brand.id, { plan: 'pro', seats: 5 }));
  const view = await fields.getTicketSchema(ctx, brand.id);
  t.same(view.effectiveSchema, { allOf: [view.schema, view.generatedSchema] });

  // Changing a definition changes validation at once.
  await fields.update(ctx, brand.id, 'ticket', 'plan', { options: ['free', 'pro', 'gold'] });
  await t.resolves(fields.validateCustomFields(ctx, brand.id, { plan: 'gold', seats: 5 }));
  await fields.remove(ctx, brand.id, 'ticket', 'plan');
  await t.resolves(fields.validateCustomFields(ctx, brand.id, { seats: 5 }), 'a deleted definition no longer requires anything');
});

t.test("assertStatusKey accepts the brand's status keys and refuses others", async (t) => {
  const { ctx, brand } = await setup();
  const other = await createBrand(ctx, { name: 'Other' });
  await statuses.create(ctx, other.id, { key: 'only_other', name: 'Only other', color: '#000000' });
  for (const key of ['open', 'pending', 'resolved', 'closed']) await t.resolves(statuses.assertStatusKey(ctx, brand.id, key), key);
  const refused = await failure(statuses.assertStatusKey(ctx, brand.id, 'only_other'));
  t.equal(refused.status, 400);
  t.equal(refused.code, 'invalid_status');
  t.same(refused.fields, ['status']);
  await statuses.create(ctx, brand.id, { key: 'waiting', name: 'Waiting', color: '#000000' });
  await t.resolves(statuses.assertStatusKey(ctx, brand.id, 'waiting'));
  t.same((await failure(statuses.assertStatusKey(ctx, brand.id, 'Open'))).code, 'invalid_status', 'keys are exact');
});

t.test('a brand created inside a transaction that rolls back leaves no statuses behind', async (t) => {
  const { ctx } = await setup();
  const before = Number((await db('statuses').count({ n: '*' }))[0]!.n);
  await t.rejects(
    db.transaction(async (trx) => {
      await createBrand({ ...ctx, db: trx }, { name: 'Doomed' });
      throw new Error('roll back');
    }),
  );
  t.equal(Number((await db('statuses').count({ n: '*' }))[0]!.n), before, 'the system statuses went with the brand');
});

t.test('the rules ticket create validates with follow every definition change at once, also inside a transaction and under concurrency', async (t) => {
  const { ctx, brand } = await setup();
  // Ten definitions created at once: each commit sees the others (the trigger serializes on the brand row).
  await Promise.all(Array.from({ length: 10 }, (_, i) => fields.create(ctx, brand.id, 'ticket', { key: `f${i}`, label: `F${i}`, type: 'number', required: true })));
  t.same((await failure(fields.validateCustomFields(ctx, brand.id, {}))).fields, Array.from({ length: 10 }, (_, i) => `customFields.f${i}`).sort());

  await fields.update(ctx, brand.id, 'ticket', 'f0', { type: 'text' });
  const all = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`f${i}`, i]));
  t.same((await failure(fields.validateCustomFields(ctx, brand.id, all))).fields, ['customFields.f0'], 'a type change applies');
  for (let i = 1; i < 10; i++) await fields.remove(ctx, brand.id, 'ticket', `f${i}`);
  await t.resolves(fields.validateCustomFields(ctx, brand.id, { f0: 'x' }), 'removed definitions no longer constrain');

  // In one transaction: the brand read before the change is not reused after it.
  await db
    .transaction(async (trx) => {
      const tx = { ...ctx, db: trx };
      await t.resolves(fields.validateCustomFields(tx, brand.id, { f0: 'x' }));
      await fields.create(tx, brand.id, 'ticket', { key: 'sla', label: 'SLA', type: 'boolean', required: true });
      t.same((await failure(fields.validateCustomFields(tx, brand.id, { f0: 'x' }))).fields, ['customFields.sla'], 'the new rule applies in the same transaction');
      throw new Error('roll back');
    })
    .catch(() => undefined);
  await t.resolves(fields.validateCustomFields(ctx, brand.id, { f0: 'x' }), 'a rolled-back definition leaves no rule');
});
