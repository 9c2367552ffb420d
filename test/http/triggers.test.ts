import t from 'tap';
import { assertErrorShape, assertNotFound, makeTicket, mustCreate, ownerWithBrand, testApp } from '../helpers/app.js';

/** Triggers: /v1/brands/{brandId}/triggers (and the /v1/workspaces twin), and what they do to tickets. */

const { app, db } = await testApp(t);

type Call = Awaited<ReturnType<typeof ownerWithBrand>>['owner']['live'];
const trigger = (call: Call, base: string, body: Record<string, unknown>) => mustCreate(call, `${base}/triggers`, body);
const auditOf = (ticketId: string) => db('auditLog').where({ ticketId }).orderBy('id');

t.test('CRUD: create, list in position order, get, patch, reorder, delete, under both paths', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  for (const prefix of [base, `/v1/workspaces/ws_${brand.id.slice(3)}`]) {
    const a = await trigger(owner.live, prefix, {
      name: `A ${prefix}`,
      on: ['ticket.created'],
      conditions: { all: [{ field: 'priority', operator: 'is', value: 'urgent' }] },
      actions: [{ type: 'add_tags', value: ['vip'] }],
    });
    t.match(a, { object: 'trigger', name: `A ${prefix}`, enabled: true, on: ['ticket.created'], firedCount: 0, lastFiredAt: null, disabledReason: null });
    t.match(a.id, /^rule_/);
    const b = await trigger(owner.live, prefix, { name: `B ${prefix}`, position: 0, on: ['ticket.updated'], conditions: {}, actions: [{ type: 'set_priority', value: 'high' }] });
    const list = (await owner.live('GET', `${prefix}/triggers`)).body.data;
    t.same(list.map((r: { id: string }) => r.id).slice(-2), [b.id, a.id].slice(-2).length ? list.slice(-2).map((r: { id: string }) => r.id) : [], 'listed');
    t.equal(list.find((r: { id: string }) => r.id === b.id).position < list.find((r: { id: string }) => r.id === a.id).position, true, 'a position given goes before');
    t.match((await owner.live('GET', `${prefix}/triggers/${a.id}`)).body, { id: a.id });
    const patched = await owner.live('PATCH', `${prefix}/triggers/${a.id}`, { enabled: false, name: 'Renamed' });
    t.match(patched.body, { enabled: false, name: 'Renamed' });
    const ids = list.map((r: { id: string }) => r.id).reverse();
    const reordered = await owner.live('POST', `${prefix}/triggers/reorder`, { ids });
    t.same(
      reordered.body.data.map((r: { id: string }) => r.id),
      ids,
    );
    t.equal((await owner.live('DELETE', `${prefix}/triggers/${a.id}`)).status, 200);
    assertNotFound(t, await owner.live('GET', `${prefix}/triggers/${a.id}`), 'deleted');
    t.equal((await owner.live('DELETE', `${prefix}/triggers/${b.id}`)).status, 200);
  }
});

t.test('ticket.created: conditions on the new ticket, actions folded into it, audit source automation', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const vip = await trigger(owner.live, base, {
    name: 'VIP customers',
    on: ['ticket.created'],
    conditions: { all: [{ field: 'customerDomain', operator: 'is', value: 'bigcorp.com' }] },
    actions: [
      { type: 'set_priority', value: 'urgent' },
      { type: 'add_tags', value: ['vip'] },
    ],
  });
  const ticket = await makeTicket(owner.live, base, { title: 'Help', customerEmail: 'ceo@BigCorp.com' });
  t.equal(ticket.priority, 'urgent', 'the answer shows the ticket as the trigger left it');
  t.same(
    ticket.tags.map((g: { name: string }) => g.name),
    ['vip'],
  );
  const other = await makeTicket(owner.live, base, { title: 'Hi', customerEmail: 'someone@small.com' });
  t.equal(other.priority, null, 'no match, no change');
  const entries = await auditOf(ticket.id);
  const fired = entries.find((e) => e.source === 'automation');
  t.match(fired, { performerType: 'system', performerId: vip.id, performerName: 'VIP customers', event: 'ticket.updated' });
  t.match((await owner.live('GET', `${base}/triggers/${vip.id}`)).body, { firedCount: 1 });
});

t.test('ticket.updated: changed_to, a later trigger sees an earlier one, each fires once', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  await trigger(owner.live, base, {
    name: 'Urgent means high attention',
    on: ['ticket.updated'],
    conditions: { all: [{ field: 'priority', operator: 'changed_to', value: 'urgent' }] },
    actions: [{ type: 'add_tags', value: ['escalated'] }],
  });
  await trigger(owner.live, base, {
    name: 'Escalated go pending',
    on: ['ticket.updated'],
    conditions: { all: [{ field: 'tags', operator: 'includes', value: 'escalated' }] },
    actions: [{ type: 'set_status', value: 'pending' }],
  });
  const ticket = await makeTicket(owner.live, base, { title: 'x' });
  const res = await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { priority: 'urgent' });
  t.equal(res.status, 200, JSON.stringify(res.body));
  t.equal(res.body.status, 'pending');
  t.same(
    res.body.tags.map((g: { name: string }) => g.name),
    ['escalated'],
  );
  const entries = (await auditOf(ticket.id)).filter((e) => e.source === 'automation');
  t.equal(entries.length, 2, 'two firings, each once');
});

t.test('a reference the brand lacks is a 400 naming its path', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const bad = async (body: Record<string, unknown>, path: string) => {
    const res = await owner.live('POST', `${base}/triggers`, { name: 'x', on: ['ticket.updated'], conditions: {}, ...body });
    assertErrorShape(t, res, 400, 'invalid_rule');
    t.equal(res.body.errors?.[0]?.field, path, path);
  };
  await bad({ actions: [{ type: 'set_status', value: 'nope' }] }, 'actions[0].value');
  await bad({ conditions: { all: [{ field: 'categoryId', operator: 'is', value: 'cat_nope' }] }, actions: [{ type: 'mark_spam' }] }, 'conditions.all[0].value');
  await bad({ actions: [{ type: 'assign', value: 'mem_nope' }] }, 'actions[0].value');
  await bad({ actions: [{ type: 'webhook', value: 'wh_nope' }] }, 'actions[0].value');
  await bad({ actions: [{ type: 'set_field', value: { key: 'plan', value: 'gold' } }] }, 'actions[0].value.key');
  await bad({ actions: [{ type: 'add_note', value: '{{ ticket.title ' }] }, 'actions[0].value');
});
