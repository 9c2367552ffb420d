import t from 'tap';
import { assertErrorShape, assertNotFound, client, makeBrand, makeTicket, mustCreate, ownerWithBrand, secondInstance, servicesOf, signup, testApp } from '../helpers/app.js';
import { movableClock } from '../helpers/clock.js';
import { postInbound } from '../helpers/inbound.js';
import { SIGN_IN_TEST_ENV, teamOf, teamOfThree } from '../helpers/sign-in.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';

/** Triggers: /v1/brands/{brandId}/triggers (and the /v1/workspaces twin), and what they do to the tickets they run on. */

const SECRET = 'inbound-secret-for-triggers-0123456789';
const DOMAIN = 'inbound.triggers.example';
const clock = movableClock();
const first = await testApp(t, { ...SIGN_IN_TEST_ENV, TICKETD_INBOUND_SECRET: SECRET, TICKETD_INBOUND_DOMAIN: DOMAIN }, { clock });
const { app, db } = first;
const services = servicesOf(db);

type Call = Awaited<ReturnType<typeof ownerWithBrand>>['owner']['live'];
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const trigger = (call: Call, base: string, body: Record<string, unknown>): Promise<any> => mustCreate(call, `${base}/triggers`, body);
const onUpdate = (name: string, conditions: Record<string, unknown>, actions: unknown[]) => ({ name, on: ['ticket.updated'], conditions, actions });
const automationEntries = async (ticketId: string) =>
  (await db('auditLog').where({ ticketId, source: 'automation', event: 'ticket.updated' }).orderBy('id')) as { performerId: string; changes: unknown[] }[];
const tagNames = (ticket: { tags: { name: string }[] }) => ticket.tags.map((g) => g.name).sort();
const ruleMails = (ticketId: string) => db('mailMessages').where({ ticketId, kind: 'rule' }).orderBy('id');
const patch = async (call: Call, base: string, ticketId: string, body: Record<string, unknown>) => {
  const res = await call('PATCH', `${base}/tickets/${ticketId}`, body);
  if (res.status !== 200) throw new Error(`PATCH failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
};

t.test('CRUD under both paths: create, list in the order they run, get, patch, reorder, delete', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  for (const prefix of [base, `/v1/workspaces/ws_${brand.id.slice(3)}`]) {
    const a = await trigger(owner.live, prefix, {
      name: 'A',
      on: ['ticket.created'],
      conditions: { all: [{ field: 'priority', operator: 'is', value: 'urgent' }] },
      actions: [{ type: 'add_tags', value: ['vip'] }],
    });
    t.match(a, { object: 'trigger', name: 'A', enabled: true, position: 0, on: ['ticket.created'], firedCount: 0, lastFiredAt: null, disabledReason: null });
    t.match(a.id, /^rule_[0-9a-z]{26}$/);
    t.same(a.conditions, { all: [{ field: 'priority', operator: 'is', value: 'urgent' }], any: [] }, 'conditions as saved, any defaulted');
    const b = await trigger(owner.live, prefix, onUpdate('B', {}, [{ type: 'set_priority', value: 'high' }]));
    const c = await trigger(owner.live, prefix, { ...onUpdate('C', {}, [{ type: 'set_priority', value: 'low' }]), position: 0 });
    const order = async () => (await owner.live('GET', `${prefix}/triggers`)).body.data.map((r: { name: string; position: number }) => `${r.name}${r.position}`);
    t.same(await order(), ['C0', 'A1', 'B2'], 'a position given goes before the one there');
    t.match((await owner.live('GET', `${prefix}/triggers/${a.id}`)).body, { id: a.id, name: 'A' });
    const patched = await owner.live('PATCH', `${prefix}/triggers/${a.id}`, { enabled: false, name: 'A renamed', position: 2 });
    t.match(patched.body, { enabled: false, name: 'A renamed', position: 2 });
    t.same(await order(), ['C0', 'B1', 'A renamed2']);
    const reordered = await owner.live('POST', `${prefix}/triggers/reorder`, { ids: [a.id, b.id, c.id] });
    t.same(
      reordered.body.data.map((r: { id: string }) => r.id),
      [a.id, b.id, c.id],
    );
    assertErrorShape(t, await owner.live('POST', `${prefix}/triggers/reorder`, { ids: [a.id, b.id] }), 400, 'invalid_order');
    assertErrorShape(t, await owner.live('POST', `${prefix}/triggers`, onUpdate('B', {}, [{ type: 'mark_spam' }])), 409, 'rule_name_taken');
    for (const r of [a, b, c]) t.equal((await owner.live('DELETE', `${prefix}/triggers/${r.id}`)).status, 200);
    assertNotFound(t, await owner.live('GET', `${prefix}/triggers/${a.id}`), 'deleted');
    t.same((await owner.live('GET', `${prefix}/triggers`)).body.data, []);
  }
});

t.test('bad input: schema errors, unknown operators and fields, durations on a trigger', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const bad = async (body: Record<string, unknown>, label: string) => {
    const res = await owner.live('POST', `${base}/triggers`, body);
    t.equal(res.status, 400, label);
    assertErrorShape(t, res, 400, 'validation_failed');
  };
  await bad({ name: 'x', on: ['ticket.created'], conditions: {}, actions: [] }, 'no action');
  await bad({ name: 'x', on: ['ticket.deleted'], conditions: {}, actions: [{ type: 'mark_spam' }] }, 'unknown event');
  await bad({ name: 'x', on: ['ticket.created'], conditions: { all: [{ field: 'title', operator: 'resembles', value: 'a' }] }, actions: [{ type: 'mark_spam' }] }, 'operator');
  await bad({ name: 'x', on: ['ticket.created'], conditions: { all: [{ field: 'hoursSinceCreated', operator: 'gt', value: 1 }] }, actions: [{ type: 'mark_spam' }] }, 'duration');
  await bad({ name: 'x', on: ['ticket.created'], conditions: {}, actions: [{ type: 'explode', value: 1 }] }, 'action type');
  await bad({ name: 'x', on: ['ticket.created'], conditions: {}, actions: [{ type: 'set_priority', value: 'critical' }] }, 'priority');
  await bad({ name: ' ', on: ['ticket.created'], conditions: {}, actions: [{ type: 'mark_spam' }] }, 'blank name');
  const huge = 'x'.repeat(19_000);
  const big = await owner.live('POST', `${base}/triggers`, {
    name: 'big',
    on: ['ticket.created'],
    conditions: {},
    actions: [1, 2, 3, 4].map(() => ({ type: 'add_note', value: huge })),
  });
  assertErrorShape(t, big, 400, 'rule_too_large');
});

t.test('every reference the brand lacks is a 400 that names its path', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const other = await ownerWithBrand(app);
  const otherCategory = await mustCreate(other.owner.live, `${other.base}/categories`, { name: 'Theirs' });
  const bad = async (body: Record<string, unknown>, path: string) => {
    const res = await owner.live('POST', `${base}/triggers`, { name: 'x', on: ['ticket.updated'], conditions: {}, ...body });
    assertErrorShape(t, res, 400, 'invalid_rule');
    t.equal(res.body.errors?.[0]?.field, path, path);
  };
  await bad({ actions: [{ type: 'set_status', value: 'nope' }] }, 'actions[0].value');
  await bad({ conditions: { any: [{ field: 'status', operator: 'in', value: ['open', 'nope'] }] }, actions: [{ type: 'mark_spam' }] }, 'conditions.any[0].value');
  await bad({ conditions: { all: [{ field: 'categoryId', operator: 'is', value: otherCategory.id }] }, actions: [{ type: 'mark_spam' }] }, 'conditions.all[0].value');
  await bad({ actions: [{ type: 'set_category', value: otherCategory.id }] }, 'actions[0].value');
  await bad({ actions: [{ type: 'assign', value: other.owner.ownerId }] }, 'actions[0].value');
  await bad({ actions: [{ type: 'assign', value: { roundRobin: [owner.ownerId, 'mem_nope'] } }] }, 'actions[0].value.roundRobin[1]');
  await bad({ actions: [{ type: 'add_watchers', value: ['mem_nope'] }] }, 'actions[0].value[0]');
  await bad({ actions: [{ type: 'mail_members', value: { to: ['mem_nope'], subject: 'a', body: 'b' } }] }, 'actions[0].value.to[0]');
  await bad({ actions: [{ type: 'webhook', value: 'wh_nope' }] }, 'actions[0].value');
  await bad({ actions: [{ type: 'set_field', value: { key: 'plan', value: 'gold' } }] }, 'actions[0].value.key');
  await bad({ conditions: { all: [{ field: 'field.plan', operator: 'is', value: 'gold' }] }, actions: [{ type: 'mark_spam' }] }, 'conditions.all[0].field');
  await bad({ actions: [{ type: 'add_note', value: '{{ ticket.title ' }] }, 'actions[0].value');
  await bad({ actions: [{ type: 'mail_customer', value: { subject: '{% if %}', body: 'b' } }] }, 'actions[0].value.subject');
  const ok = await trigger(owner.live, base, onUpdate('fine', {}, [{ type: 'set_status', value: 'pending' }]));
  const patched = await owner.live('PATCH', `${base}/triggers/${ok.id}`, { actions: [{ type: 'set_status', value: 'nope' }] });
  assertErrorShape(t, patched, 400, 'invalid_rule');
});

t.test('rights: owners and admins manage triggers, members read them, other accounts and modes see nothing', async (t) => {
  const team = await teamOfThree(app, services);
  const body = onUpdate('By admin', {}, [{ type: 'set_priority', value: 'high' }]);
  const made = await team.asAdmin('POST', `${team.base}/triggers`, body);
  t.equal(made.status, 201, 'an admin creates one');
  t.equal((await team.asMember('GET', `${team.base}/triggers`)).status, 200, 'a member reads them');
  t.equal(
    (await team.asMember('POST', `${team.base}/triggers/${made.body.id}/test`, { ticketId: (await makeTicket(team.owner.live, team.base)).id })).status,
    200,
    'and dry-runs one',
  );
  assertErrorShape(t, await team.asMember('POST', `${team.base}/triggers`, { ...body, name: 'By member' }), 403, 'insufficient_role');
  assertErrorShape(t, await team.asMember('PATCH', `${team.base}/triggers/${made.body.id}`, { name: 'x' }), 403, 'insufficient_role');
  assertErrorShape(t, await team.asMember('DELETE', `${team.base}/triggers/${made.body.id}`), 403, 'insufficient_role');

  const stranger = await signup(app);
  assertNotFound(t, await stranger.live('GET', `${team.base}/triggers`), 'another account: the brand');
  const strangerBrand = await makeBrand(stranger.live);
  for (const [method, body2] of [
    ['GET', undefined],
    ['PATCH', { name: 'mine now' }],
    ['DELETE', undefined],
  ] as const) {
    assertNotFound(t, await stranger.live(method, `/v1/brands/${strangerBrand.id}/triggers/${made.body.id}`, body2), `another account's brand: ${method}`);
  }
  assertNotFound(t, await team.owner.test('GET', `${team.base}/triggers/${made.body.id}`), 'test mode');
  t.match((await team.owner.live('GET', `${team.base}/triggers/${made.body.id}`)).body, { name: 'By admin' }, 'unchanged');
});

t.test('every condition operator, on a ticket.updated', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  await mustCreate(owner.live, `${base}/fields/ticket`, { key: 'plan', label: 'Plan', type: 'text' });
  const cases: [string, Record<string, unknown>, boolean][] = [
    ['is', { field: 'title', operator: 'is', value: 'printer ON fire' }, true],
    ['is-no', { field: 'status', operator: 'is', value: 'pending' }, false],
    ['is_not', { field: 'priority', operator: 'is_not', value: 'low' }, true],
    ['is_not-no', { field: 'status', operator: 'is_not', value: 'open' }, false],
    ['in', { field: 'priority', operator: 'in', value: ['high', 'urgent'] }, true],
    ['in-no', { field: 'priority', operator: 'in', value: ['low'] }, false],
    ['not_in', { field: 'status', operator: 'not_in', value: ['pending', 'resolved'] }, true],
    ['not_in-no', { field: 'status', operator: 'not_in', value: ['open'] }, false],
    ['contains', { field: 'title', operator: 'contains', value: 'FIRE' }, true],
    ['contains-no', { field: 'body', operator: 'contains', value: 'water' }, false],
    ['not_contains', { field: 'body', operator: 'not_contains', value: 'water' }, true],
    ['not_contains-no', { field: 'body', operator: 'not_contains', value: 'smoke' }, false],
    ['starts_with', { field: 'customerEmail', operator: 'starts_with', value: 'jane@' }, true],
    ['starts_with-no', { field: 'customerEmail', operator: 'starts_with', value: 'john@' }, false],
    ['ends_with', { field: 'customerDomain', operator: 'ends_with', value: '.example' }, true],
    ['ends_with-no', { field: 'customerDomain', operator: 'ends_with', value: '.com' }, false],
    ['includes', { field: 'tags', operator: 'includes', value: ['hardware', 'printer'] }, true],
    ['includes-no', { field: 'tags', operator: 'includes', value: ['hardware', 'software'] }, false],
    ['gt', { field: 'priority', operator: 'gt', value: 'normal' }, true],
    ['gt-no', { field: 'priority', operator: 'gt', value: 'high' }, false],
    ['gte', { field: 'priority', operator: 'gte', value: 'high' }, true],
    ['lt', { field: 'priority', operator: 'lt', value: 'urgent' }, true],
    ['lte-no', { field: 'priority', operator: 'lte', value: 'low' }, false],
    ['present', { field: 'customerEmail', operator: 'present' }, true],
    ['present-no', { field: 'assigneeId', operator: 'present' }, false],
    ['absent', { field: 'categoryId', operator: 'absent' }, true],
    ['absent-no', { field: 'field.plan', operator: 'absent' }, false],
    ['changed', { field: 'priority', operator: 'changed' }, true],
    ['changed-no', { field: 'title', operator: 'changed' }, false],
    ['changed_to', { field: 'priority', operator: 'changed_to', value: 'high' }, true],
    ['changed_to-no', { field: 'priority', operator: 'changed_to', value: 'urgent' }, false],
    ['changed_from', { field: 'priority', operator: 'changed_from', value: 'normal' }, true],
    ['changed_from-no', { field: 'priority', operator: 'changed_from', value: 'low' }, false],
    ['field', { field: 'field.plan', operator: 'is', value: 'gold' }, true],
    ['source', { field: 'source', operator: 'is', value: 'api' }, true],
    ['hours', { field: 'withinBusinessHours', operator: 'is', value: true }, true],
  ];
  for (const [name, condition] of cases) await trigger(owner.live, base, onUpdate(name, { all: [condition] }, [{ type: 'add_tags', value: [`op-${name}`] }]));
  // `any`: one of them is enough; all of them must hold.
  await trigger(owner.live, base, onUpdate('any', { any: [cases[1]![1], cases[0]![1]] }, [{ type: 'add_tags', value: ['op-any'] }]));
  await trigger(owner.live, base, onUpdate('all-no', { all: [cases[0]![1], cases[1]![1]] }, [{ type: 'add_tags', value: ['op-all-no'] }]));

  const ticket = await makeTicket(owner.live, base, {
    title: 'Printer on fire',
    body: 'Smoke everywhere',
    customerEmail: 'jane@acme.example',
    priority: 'normal',
    tags: ['hardware', 'printer'],
    customFields: { plan: 'gold' },
  });
  const updated = await patch(owner.live, base, ticket.id, { priority: 'high' });
  const fired = tagNames(updated).filter((n) => n.startsWith('op-'));
  const expected = [...cases.filter(([, , match]) => match).map(([name]) => `op-${name}`), 'op-any'].sort();
  t.same(fired, expected, 'exactly the matching conditions fired');
});

t.test('withinBusinessHours follows the brand’s business hours and the clock', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const hours = { start: '09:00', end: '17:00', days: [1, 2, 3, 4, 5], timezone: 'Europe/Paris' };
  t.equal((await owner.live('PATCH', base, { slaBusinessHours: hours })).status, 200);
  await trigger(owner.live, base, {
    name: 'after hours',
    on: ['ticket.created'],
    conditions: { all: [{ field: 'withinBusinessHours', operator: 'is', value: false }] },
    actions: [{ type: 'add_tags', value: ['after-hours'] }],
  });
  try {
    clock.setTo(Date.parse('2026-03-14T12:00:00Z')); // a Saturday
    t.same(tagNames(await makeTicket(owner.live, base, { title: 'weekend' })), ['after-hours']);
    clock.setTo(Date.parse('2026-03-16T10:00:00Z')); // Monday, 11:00 in Paris
    t.same(tagNames(await makeTicket(owner.live, base, { title: 'weekday' })), []);
    clock.setTo(Date.parse('2026-03-16T16:30:00Z')); // Monday, 17:30 in Paris
    t.same(tagNames(await makeTicket(owner.live, base, { title: 'evening' })), ['after-hours']);
  } finally {
    clock.reset();
  }
});

t.test('comment.created: the comment’s fields, and a status the comment set counts as changed', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  await trigger(owner.live, base, {
    name: 'Customer replied',
    on: ['comment.created'],
    conditions: {
      all: [
        { field: 'comment.authorType', operator: 'is', value: 'CUSTOMER' },
        { field: 'comment.isInternal', operator: 'is', value: false },
        { field: 'comment.body', operator: 'contains', value: 'urgent' },
      ],
    },
    actions: [{ type: 'set_priority', value: 'urgent' }],
  });
  await trigger(owner.live, base, {
    name: 'Reopened',
    on: ['comment.created'],
    conditions: { all: [{ field: 'status', operator: 'changed_from', value: 'pending' }] },
    actions: [{ type: 'add_tags', value: ['reopened'] }],
  });
  const ticket = await makeTicket(owner.live, base, { title: 'x', status: 'pending' });
  const note = await owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'urgent, internal', metadata: { isInternal: true } });
  t.equal(note.status, 201);
  let now = (await owner.live('GET', `${base}/tickets/${ticket.id}`)).body;
  t.equal(now.priority, null, 'an agent’s internal note does not match');
  t.equal((await owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'This is URGENT', authorType: 'CUSTOMER', setStatus: 'open' })).status, 201);
  now = (await owner.live('GET', `${base}/tickets/${ticket.id}`)).body;
  t.equal(now.priority, 'urgent', 'the customer’s comment matched');
  t.same(tagNames(now), ['reopened'], 'the status the comment set changed from pending');
});

t.test('every action', async (t) => {
  const team = await teamOfThree(app, services);
  const { owner, base } = team;
  const category = await mustCreate(owner.live, `${base}/categories`, { name: 'Billing' });
  await mustCreate(owner.live, `${base}/fields/ticket`, { key: 'tier', label: 'Tier', type: 'text' });
  const hook = await mustCreate(owner.live, `${base}/webhooks`, { url: 'https://93.184.215.14/rules', events: ['ticket.deleted'] });
  const busy = await makeTicket(owner.live, base, { title: 'keeps the admin busy', assigneeId: team.admin.id });
  t.ok(busy.id);
  await trigger(owner.live, base, {
    name: 'Everything',
    on: ['ticket.created'],
    conditions: { all: [{ field: 'title', operator: 'starts_with', value: 'Everything' }] },
    actions: [
      { type: 'set_status', value: 'pending' },
      { type: 'set_priority', value: 'high' },
      { type: 'set_category', value: category.id },
      { type: 'set_field', value: { key: 'tier', value: 'gold' } },
      { type: 'add_tags', value: ['one', 'two', 'three'] },
      { type: 'remove_tags', value: ['two', 'given'] },
      { type: 'assign', value: { roundRobin: [team.admin.id, team.member.id] } },
      { type: 'add_watchers', value: [team.admin.id] },
      { type: 'add_note', value: 'Routed {{ ticket.title }} for {{ customer.name }} at {{ brand.name }} to {{ assignee.name }}' },
      { type: 'mail_customer', value: { subject: 'We got {{ ticket.title }}', body: 'Hello {{ customer.name }}, ticket #{{ ticket.number }} is {{ ticket.status }}.' } },
      { type: 'mail_members', value: { subject: 'New: {{ ticket.title }}', body: 'Tier {{ ticket.customFields.tier }}' } },
      { type: 'webhook', value: hook.id },
    ],
  });
  const ticket = await makeTicket(owner.live, base, { title: 'Everything at once', customerEmail: 'jane@acme.example', customerName: 'Jane', tags: ['given'] });
  t.match(ticket, { status: 'pending', priority: 'high', categoryId: category.id, customFields: { tier: 'gold' }, assigneeId: team.member.id });
  t.same(tagNames(ticket), ['one', 'three'], 'tags added and removed, the given one too');
  const watchers = (await owner.live('GET', `${base}/tickets/${ticket.id}/watchers`)).body;
  t.same(
    (watchers.data ?? watchers).map((w: { memberId: string }) => w.memberId),
    [team.admin.id],
    'watcher added',
  );
  const comments = (await owner.live('GET', `${base}/tickets/${ticket.id}/comments`)).body;
  const notes = (comments.data ?? comments) as { body: string; isInternal?: boolean; metadata?: Record<string, unknown> }[];
  t.equal(notes.length, 1);
  t.equal(notes[0]!.body, 'Routed Everything at once for Jane at Desk to Mo Member', 'the note is rendered with the ticket as written');
  const mails = await ruleMails(ticket.id);
  t.equal(mails.length, 2);
  const toCustomer = mails.find((m) => m.message.to[0].address === 'jane@acme.example');
  t.match(toCustomer?.message, { subject: 'We got Everything at once', headers: { 'Auto-Submitted': 'auto-generated' } });
  t.match(toCustomer?.message.text, /^Hello Jane, ticket #\d+ is pending\.$/);
  const toMember = mails.find((m) => m.message.to[0].address === team.member.email);
  t.match(toMember?.message, { subject: 'New: Everything at once', text: 'Tier gold' }, 'mail_members without `to` goes to the assignee');
  const delivery = await db('outbox').where({ webhookId: hook.id }).first();
  t.match(
    delivery?.payload,
    { event: 'rule.fired', source: 'automation', data: { id: ticket.id, rule: { name: 'Everything' } } },
    'the webhook gets the firing, whatever it subscribes to',
  );

  await trigger(owner.live, base, {
    name: 'Spam words',
    on: ['ticket.created'],
    conditions: { all: [{ field: 'title', operator: 'contains', value: 'casino' }] },
    actions: [{ type: 'mark_spam' }, { type: 'assign', value: null }],
  });
  const spam = await makeTicket(owner.live, base, { title: 'Free casino chips', assigneeId: team.admin.id });
  t.match(spam, { isSpam: true, assigneeId: null }, 'marked spam, unassigned');
});

t.test('round robin: the least loaded member of the list with open tickets, ties in list order', async (t) => {
  const team = await teamOfThree(app, services);
  const { owner, base } = team;
  await trigger(owner.live, base, {
    name: 'Round robin',
    on: ['ticket.created'],
    conditions: { all: [{ field: 'assigneeId', operator: 'absent' }] },
    actions: [{ type: 'assign', value: { roundRobin: [team.admin.id, team.member.id] } }],
  });
  const assigned = [];
  for (let i = 0; i < 4; i++) assigned.push((await makeTicket(owner.live, base, { title: `rr ${i}` })).assigneeId);
  t.same(assigned, [team.admin.id, team.member.id, team.admin.id, team.member.id]);
  const resolved = (await owner.live('GET', `${base}/tickets?assigneeId=${team.admin.id}`)).body.data;
  for (const r of resolved) await patch(owner.live, base, r.id, { status: 'resolved' });
  t.equal((await makeTicket(owner.live, base, { title: 'after' })).assigneeId, team.admin.id, 'resolved tickets are no load');
});

t.test('order and passes: a later trigger sees an earlier one, an earlier one sees a later one on the next pass, each fires once', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const sees = await trigger(owner.live, base, onUpdate('Sees high', { all: [{ field: 'priority', operator: 'is', value: 'high' }] }, [{ type: 'add_tags', value: ['saw-high'] }]));
  const sets = await trigger(
    owner.live,
    base,
    onUpdate('Sets high', { all: [{ field: 'status', operator: 'changed_to', value: 'pending' }] }, [{ type: 'set_priority', value: 'high' }]),
  );
  const always = await trigger(owner.live, base, onUpdate('Always', {}, [{ type: 'add_note', value: 'once' }]));
  const ticket = await makeTicket(owner.live, base, { title: 'x' });
  const updated = await patch(owner.live, base, ticket.id, { status: 'pending' });
  t.equal(updated.priority, 'high');
  t.same(tagNames(updated), ['saw-high'], 'the earlier trigger fired on the second pass');
  const entries = await automationEntries(ticket.id);
  t.same(
    entries.map((e) => e.performerId),
    [sets.id, always.id, sees.id],
    'firing order: the first pass, then what the change re-armed',
  );
  const notes = (await owner.live('GET', `${base}/tickets/${ticket.id}/comments`)).body;
  t.equal((notes.data ?? notes).length, 1, 'a trigger that always matches fires once a change');
  const rules = (await owner.live('GET', `${base}/triggers`)).body.data;
  t.same(
    rules.map((r: { firedCount: number }) => r.firedCount),
    [1, 1, 1],
  );
});

t.test('the loop guard: two triggers that undo each other settle, each firing once', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  await trigger(owner.live, base, onUpdate('Open to pending', { all: [{ field: 'status', operator: 'is', value: 'open' }] }, [{ type: 'set_status', value: 'pending' }]));
  await trigger(owner.live, base, onUpdate('Pending to open', { all: [{ field: 'status', operator: 'is', value: 'pending' }] }, [{ type: 'set_status', value: 'open' }]));
  const ticket = await makeTicket(owner.live, base, { title: 'ping pong' });
  const updated = await patch(owner.live, base, ticket.id, { priority: 'low' });
  t.equal(updated.status, 'open', 'settled');
  t.equal((await automationEntries(ticket.id)).length, 2, 'two firings, no more');
});

t.test('closed tickets: no trigger fires on one, except on the change that closes it', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  await trigger(owner.live, base, onUpdate('On close', { all: [{ field: 'status', operator: 'changed_to', value: 'closed' }] }, [{ type: 'add_tags', value: ['closed-by-rule'] }]));
  await trigger(owner.live, base, onUpdate('Any change', {}, [{ type: 'add_note', value: 'changed' }]));
  const ticket = await makeTicket(owner.live, base, { title: 'x' });
  const closed = await patch(owner.live, base, ticket.id, { status: 'closed' });
  t.same(tagNames(closed), ['closed-by-rule'], 'the closing change runs them');
  const before = (await automationEntries(ticket.id)).length;
  await patch(owner.live, base, ticket.id, { priority: 'low' });
  t.equal((await automationEntries(ticket.id)).length, before, 'nothing fires on the closed ticket');
});

t.test('rules stay in their brand and account', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const second = await makeBrand(owner.live, 'Second');
  await trigger(owner.live, base, { name: 'Tag all', on: ['ticket.created'], conditions: {}, actions: [{ type: 'add_tags', value: ['first-brand'] }] });
  t.same(tagNames(await makeTicket(owner.live, `/v1/brands/${second.id}`, { title: 'x' })), [], 'another brand of the account');
  t.same(tagNames(await makeTicket(owner.live, base, { title: 'x' })), ['first-brand']);
  const other = await ownerWithBrand(app);
  t.same(tagNames(await makeTicket(other.owner.live, other.base, { title: 'x' })), [], 'another account');
  const testBrand = await makeBrand(owner.test);
  t.same(tagNames(await makeTicket(owner.test, `/v1/brands/${testBrand.id}`, { title: 'x' })), [], 'test mode');
});

t.test('no mail loop: a rule never mails a customer about an auto-submitted message', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  await trigger(owner.live, base, {
    name: 'Acknowledge',
    on: ['ticket.created', 'comment.created'],
    conditions: {},
    actions: [{ type: 'mail_customer', value: { subject: 'Got it', body: 'We will answer soon.' } }],
  });
  const mail = (from: string, id: string, headers: string) =>
    [
      `From: ${from}`,
      `To: ${brand.id}@${DOMAIN}`,
      'Subject: Hello',
      `Message-ID: <${id}@customer.example>`,
      headers,
      'MIME-Version: 1.0',
      'Content-Type: text/plain',
      '',
      'Hello there',
    ]
      .filter(Boolean)
      .join('\r\n');
  const human = await postInbound(app, SECRET, mail('Jane <jane@customer.example>', 'human-1', ''));
  t.equal(human.action, 'ticket_created');
  const acks = await ruleMails(human.ticketId!);
  t.equal(acks.length, 1, 'a person is acknowledged');
  t.match(acks[0].message.headers, { 'Auto-Submitted': 'auto-generated' });
  const robot = await postInbound(app, SECRET, mail('Olaf <olaf@customer.example>', 'ooo-1', 'Auto-Submitted: auto-replied'));
  t.equal(robot.action, 'ticket_created');
  t.same(await ruleMails(robot.ticketId!), [], 'an out-of-office is not acknowledged');
  t.equal((await automationEntries(robot.ticketId!)).length, 1, 'the rule still fired (and says so)');
});

t.test('a rule naming something since deleted is disabled, saying why, and the change goes through', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const category = await mustCreate(owner.live, `${base}/categories`, { name: 'Short-lived' });
  const rule = await trigger(owner.live, base, onUpdate('Categorize', {}, [{ type: 'set_category', value: category.id }]));
  t.equal((await owner.live('DELETE', `${base}/categories/${category.id}`)).status < 300, true);
  const ticket = await makeTicket(owner.live, base, { title: 'x' });
  const updated = await patch(owner.live, base, ticket.id, { priority: 'high' });
  t.match(updated, { priority: 'high', categoryId: null });
  const after = (await owner.live('GET', `${base}/triggers/${rule.id}`)).body;
  t.match(after, { enabled: false, disabledReason: /actions\[0\]\.value: .* is not a category of this brand/ });
  t.equal((await db('auditLog').where({ entityId: rule.id, event: 'rule.disabled' })).length, 1, 'the log says so');
});

t.test('the dry run: each condition’s result, the actions that would apply, nothing written', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const rule = await trigger(owner.live, base, {
    name: 'VIP',
    on: ['ticket.created'],
    conditions: {
      all: [{ field: 'customerDomain', operator: 'is', value: 'vip.example' }],
      any: [
        { field: 'priority', operator: 'is', value: 'urgent' },
        { field: 'title', operator: 'contains', value: 'down' },
      ],
    },
    actions: [{ type: 'add_tags', value: ['vip'] }],
  });
  const ticket = await makeTicket(owner.live, base, { title: 'Site down', customerEmail: 'a@vip.example' });
  const before = await db('auditLog').count({ n: '*' }).first();
  const res = await owner.live('POST', `${base}/triggers/${rule.id}/test`, { ticketId: ticket.id });
  t.equal(res.status, 200);
  t.match(res.body, {
    matched: true,
    conditions: {
      all: [{ field: 'customerDomain', result: true }],
      any: [
        { field: 'priority', result: false },
        { field: 'title', result: true },
      ],
    },
    actions: [{ type: 'add_tags', value: ['vip'] }],
  });
  t.same(await db('auditLog').count({ n: '*' }).first(), before, 'nothing written');
  t.same(tagNames((await owner.live('GET', `${base}/tickets/${ticket.id}`)).body), ['vip'], 'the tag is the create’s, not the dry run’s');
  assertNotFound(t, await owner.live('POST', `${base}/triggers/${rule.id}/test`, { ticketId: 'tkt_nope' }), 'unknown ticket');
});

t.test('webhooks tell a rule’s change from a person’s; concurrent updates each run the triggers', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const hook = await mustCreate(owner.live, `${base}/webhooks`, { url: 'https://93.184.215.14/events', events: ['ticket.updated'] });
  const rule = await trigger(
    owner.live,
    base,
    onUpdate('Escalate', { all: [{ field: 'priority', operator: 'changed_to', value: 'urgent' }] }, [{ type: 'set_status', value: 'pending' }]),
  );
  const ticket = await makeTicket(owner.live, base, { title: 'x' });
  await patch(owner.live, base, ticket.id, { priority: 'urgent' });
  const payloads = (await db('outbox').where({ webhookId: hook.id })).map((r) => r.payload);
  t.equal(payloads.length, 2);
  t.match(
    payloads.find((p) => p.source === 'api'),
    { event: 'ticket.updated', data: { changes: ['priority'], status: 'pending' } },
    'the caller’s change, the ticket as the commit left it',
  );
  t.match(
    payloads.find((p) => p.source === 'automation'),
    { event: 'ticket.updated', data: { changes: ['status'], status: 'pending' } },
    'the rule’s',
  );
  const others = await Promise.all([1, 2, 3].map((i) => makeTicket(owner.live, base, { title: `c${i}` })));
  const results = await Promise.all(others.map((o) => owner.live('PATCH', `${base}/tickets/${o.id}`, { priority: 'urgent' })));
  t.same(
    results.map((r) => [r.status, r.body.status]),
    [
      [200, 'pending'],
      [200, 'pending'],
      [200, 'pending'],
    ],
  );
  t.equal((await owner.live('GET', `${base}/triggers/${rule.id}`)).body.firedCount, 4, 'every firing counted');
});

t.test('at most 500 enabled rules a brand', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const first = await trigger(owner.live, base, onUpdate('first', {}, [{ type: 'mark_spam' }]));
  // The 499 others as an operator's bulk load would write them.
  await db.raw(
    `insert into rules (account_id, id, livemode, brand_id, kind, name, enabled, position, on_events, conditions, actions)
    select r.account_id, r.id || '_' || n, r.livemode, r.brand_id, r.kind, 'bulk ' || n, true, n, r.on_events, r.conditions, r.actions
    from rules r cross join generate_series(1, 499) as n where r.id = ?`,
    [first.id],
  );
  assertErrorShape(t, await owner.live('POST', `${base}/triggers`, onUpdate('one too many', {}, [{ type: 'mark_spam' }])), 400, 'too_many_rules');
  t.equal((await owner.live('POST', `${base}/triggers`, { ...onUpdate('disabled is fine', {}, [{ type: 'mark_spam' }]), enabled: false })).status, 201);
});

t.test('a rule changed in another process is obeyed by the next create here, though this one remembered the old rules', async (t) => {
  const other = await secondInstance(t, first);
  const { owner, base } = await ownerWithBrand(app);
  const rule = await trigger(owner.live, base, { name: 'Tag', on: ['ticket.created'], conditions: {}, actions: [{ type: 'add_tags', value: ['first'] }] });
  for (const title of ['learns the rules', 'one statement on what it learned']) t.same(tagNames(await makeTicket(owner.live, base, { title })), ['first'], title);
  const elsewhere = client(other.app, owner.liveKey);
  t.equal((await elsewhere('PATCH', `${base}/triggers/${rule.id}`, { actions: [{ type: 'add_tags', value: ['second'] }] })).status, 200);
  t.same(tagNames(await makeTicket(owner.live, base, { title: 'after the change' })), ['second'], 'the brand’s rules revision moved: the create read them again');
  t.equal((await elsewhere('DELETE', `${base}/triggers/${rule.id}`)).status, 200);
  t.same(tagNames(await makeTicket(owner.live, base, { title: 'after the delete' })), [], 'and a deleted rule no longer runs');
});

t.test('firing counts: tallied by the writes, exact before the roll-up, moved once by two dispatchers, a deleted rule’s with the rest', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const tag = await trigger(owner.live, base, { name: 'Tag', on: ['ticket.created', 'ticket.updated'], conditions: {}, actions: [{ type: 'add_tags', value: ['seen'] }] });
  const gone = await trigger(owner.live, base, { name: 'Gone', on: ['ticket.created'], conditions: {}, actions: [{ type: 'set_priority', value: 'low' }] });
  const made = await Promise.all([1, 2, 3].map((i) => makeTicket(owner.live, base, { title: `counted ${i}` })));
  await patch(owner.live, base, made[0]!.id, { priority: 'high' });
  const { accountId } = owner;
  const tallies = () => db('ruleFiringTallies').where({ accountId });
  t.equal((await tallies()).length, 4, 'one tally a write: three creates and an update');
  t.equal((await db('rules').where({ id: tag.id }).first()).firedCount, 0, 'the rule’s row is not written by the writes');
  const before = (await owner.live('GET', `${base}/triggers/${tag.id}`)).body;
  t.match(before, { firedCount: 4 }, 'the read adds the firings not rolled up yet');
  t.ok(before.lastFiredAt, 'and when it last fired');
  t.equal((await owner.live('GET', `${base}/triggers`)).body.data.find((r: { id: string }) => r.id === tag.id).firedCount, 4, 'the list too');
  t.equal((await owner.live('DELETE', `${base}/triggers/${gone.id}`)).status, 200);

  const quiet = { info: () => undefined, error: () => undefined };
  const dispatchers = [new Dispatcher(services, quiet), new Dispatcher(services, quiet)];
  t.teardown(() => Promise.all(dispatchers.map((d) => d.stop())));
  await Promise.all(dispatchers.map((d) => d.tick()));
  t.equal((await tallies()).length, 0, 'every tally moved');
  t.equal((await db('rules').where({ id: tag.id }).first()).firedCount, 4, 'into the rule’s row, once with two dispatchers');
  t.same((await owner.live('GET', `${base}/triggers/${tag.id}`)).body, before, 'the rule reads the same after the roll-up');
});

t.test('a member’s session outside its brands: the brand’s triggers are 404, as the brand is', async (t) => {
  const team = await teamOf(app, services);
  const other = `/v1/brands/${team.second.id}`;
  const rule = await trigger(team.owner.live, other, onUpdate('Elsewhere', {}, [{ type: 'mark_spam' }]));
  assertNotFound(t, await team.asMember('GET', `${other}/triggers`), 'list');
  assertNotFound(t, await team.asMember('GET', `${other}/triggers/${rule.id}`), 'get');
  assertNotFound(t, await team.asMember('POST', `${other}/triggers/${rule.id}/test`, { ticketId: 'tkt_x' }), 'dry run');
  t.equal((await team.asMember('GET', `/v1/brands/${team.first.id}/triggers`)).status, 200, 'its own brand answers');
});
