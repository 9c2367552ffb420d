import t from 'tap';
import { assertErrorShape, assertNotFound, makeBrand, makeTicket, mustCreate, outsiders, ownerWithBrand, servicesOf, testApp, type Reply } from '../helpers/app.js';
import { SIGN_IN_TEST_ENV, teamOfThree } from '../helpers/sign-in.js';

/** Macros: /v1/brands/{brandId}/macros (and the /v1/workspaces twin), applied to and previewed on tickets. */

const { app, db } = await testApp(t, SIGN_IN_TEST_ENV);
const services = servicesOf(db);

type Call = Awaited<ReturnType<typeof ownerWithBrand>>['owner']['live'];
const macro = (call: Call, base: string, body: Record<string, unknown>) => mustCreate(call, `${base}/macros`, { visibility: 'brand', actions: [], ...body });
const names = (ticket: { tags: { name: string }[] }) => ticket.tags.map((g) => g.name).sort();
const idsOf = (res: Reply) => (res.body.data as { id: string }[]).map((m) => m.id);

t.test('CRUD under both paths: create, list, get, patch, delete', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  for (const prefix of [base, `/v1/workspaces/ws_${brand.id.slice(3)}`]) {
    const created = await macro(owner.live, prefix, {
      name: ` Close politely ${prefix.slice(4, 14)} `,
      actions: [{ type: 'set_status', value: 'resolved' }],
      comment: { body: 'Thanks {{ customer.name }}!' },
    });
    t.match(created, {
      object: 'macro',
      brandId: brand.id,
      name: `Close politely ${prefix.slice(4, 14)}`,
      visibility: 'brand',
      ownerId: null,
      actions: [{ type: 'set_status', value: 'resolved' }],
      comment: { body: 'Thanks {{ customer.name }}!', isInternal: false },
      createdBy: String,
    });
    t.match(created.id, /^mac_[0-9a-z]{26}$/);
    t.ok(idsOf(await owner.live('GET', `${prefix}/macros`)).includes(created.id), 'listed');
    t.same((await owner.live('GET', `${prefix}/macros/${created.id}`)).body, created);
    const patched = await owner.live('PATCH', `${prefix}/macros/${created.id}`, { name: 'Renamed', comment: null, actions: [{ type: 'add_tags', value: ['done'] }] });
    t.match(patched.body, { name: 'Renamed', comment: null, actions: [{ type: 'add_tags', value: ['done'] }] });
    t.match(await db('auditLog').where({ entityId: created.id }).orderBy('id').select('event'), [{ event: 'macro.created' }, { event: 'macro.updated' }]);
    t.equal((await owner.live('DELETE', `${prefix}/macros/${created.id}`)).status, 200);
    assertNotFound(t, await owner.live('GET', `${prefix}/macros/${created.id}`), 'deleted');
  }
});

t.test('what a macro names must be the brand’s: 400 naming the path; empty and duplicate macros refused', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const bad = async (body: Record<string, unknown>, code: string, path: string | null) => {
    const res = await owner.live('POST', `${base}/macros`, { name: 'x', visibility: 'brand', actions: [], ...body });
    assertErrorShape(t, res, 400, code);
    if (path) t.equal(res.body.errors?.[0]?.field, path, path);
  };
  await bad({ actions: [{ type: 'set_status', value: 'nope' }] }, 'invalid_rule', 'actions[0].value');
  await bad(
    {
      actions: [
        { type: 'add_tags', value: ['a'] },
        { type: 'assign', value: 'mem_nope' },
      ],
    },
    'invalid_rule',
    'actions[1].value',
  );
  await bad({ actions: [{ type: 'set_field', value: { key: 'plan', value: 'gold' } }] }, 'invalid_rule', 'actions[0].value.key');
  await bad({ comment: { body: 'Hello {{ customer.name ' } }, 'invalid_rule', 'comment.body');
  await bad({ comment: { body: '{{ ticket.title | nosuchfilter }}' } }, 'invalid_rule', 'comment.body');
  await bad({}, 'empty_macro', 'actions');
  await bad({ actions: [{ type: 'nope', value: 1 }] }, 'validation_failed', null);
  await macro(owner.live, base, { name: 'Once', actions: [{ type: 'set_priority', value: 'high' }] });
  assertErrorShape(
    t,
    await owner.live('POST', `${base}/macros`, { name: 'Once', visibility: 'brand', actions: [{ type: 'set_priority', value: 'low' }] }),
    409,
    'macro_name_taken',
  );
  const saved = await macro(owner.live, base, { name: 'Good', actions: [{ type: 'set_priority', value: 'high' }] });
  const res = await owner.live('PATCH', `${base}/macros/${saved.id}`, { comment: { body: '{% if %}' } });
  assertErrorShape(t, res, 400, 'invalid_rule');
  t.equal(res.body.errors[0].field, 'comment.body', 'a change is checked too');
});

t.test('rights: members keep personal macros and use the brand’s; owners, admins and API keys manage the brand’s', async (t) => {
  const team = await teamOfThree(app, services);
  const { base, asMember, asAdmin, owner } = team;
  const brandMacro = await macro(owner.live, base, { name: 'Shared', actions: [{ type: 'set_priority', value: 'high' }] });

  const refused = await asMember('POST', `${base}/macros`, { name: 'Mine', visibility: 'brand', actions: [{ type: 'set_priority', value: 'low' }] });
  assertErrorShape(t, refused, 403, 'insufficient_role');
  const mine = await mustCreate(asMember, `${base}/macros`, { name: 'Mine', visibility: 'personal', actions: [{ type: 'set_priority', value: 'low' }] });
  t.match(mine, { visibility: 'personal', ownerId: team.member.id, createdBy: team.member.id });
  t.same(idsOf(await asMember('GET', `${base}/macros`)).sort(), [brandMacro.id, mine.id].sort(), 'a member sees the brand’s and their own');
  t.match((await asMember('PATCH', `${base}/macros/${mine.id}`, { name: 'Mine, renamed' })).body, { name: 'Mine, renamed' });
  assertErrorShape(t, await asMember('PATCH', `${base}/macros/${brandMacro.id}`, { name: 'Taken over' }), 403, 'insufficient_role');
  assertErrorShape(t, await asMember('DELETE', `${base}/macros/${brandMacro.id}`), 403, 'insufficient_role');
  assertErrorShape(t, await asMember('PATCH', `${base}/macros/${mine.id}`, { visibility: 'brand' }), 403, 'insufficient_role');
  const ticket = await makeTicket(owner.live, base, { title: 'Used by a member' });
  const applied = await asMember('POST', `${base}/macros/${brandMacro.id}/apply`, { ticketId: ticket.id });
  t.match(applied.body, { data: [{ ticketId: ticket.id, ok: true, ticket: { priority: 'high' } }] }, 'a member applies the brand’s macro');

  // Personal means personal: another member, an admin and an API key read it as 404.
  for (const [who, call] of [
    ['an admin', asAdmin],
    ['an API key', owner.live],
  ] as const) {
    assertNotFound(t, await call('GET', `${base}/macros/${mine.id}`), `${who}: get`);
    assertNotFound(t, await call('PATCH', `${base}/macros/${mine.id}`, { name: 'Seen' }), `${who}: patch`);
    assertNotFound(t, await call('POST', `${base}/macros/${mine.id}/apply`, { ticketId: ticket.id }), `${who}: apply`);
    t.notOk(idsOf(await call('GET', `${base}/macros`)).includes(mine.id), `${who}: not listed`);
  }
  assertErrorShape(t, await owner.live('POST', `${base}/macros`, { name: 'Keyed', visibility: 'personal', actions: [{ type: 'mark_spam' }] }), 400, 'personal_needs_member');

  const adminMacro = await mustCreate(asAdmin, `${base}/macros`, { name: 'By an admin', visibility: 'brand', actions: [{ type: 'set_priority', value: 'urgent' }] });
  t.equal(adminMacro.ownerId, null);
  const made = await asAdmin('PATCH', `${base}/macros/${adminMacro.id}`, { visibility: 'personal' });
  t.match(made.body, { visibility: 'personal', ownerId: team.admin.id }, 'an admin may take a brand macro as their own');
  t.equal((await asAdmin('DELETE', `${base}/macros/${adminMacro.id}`)).status, 200);
  t.equal((await asMember('DELETE', `${base}/macros/${mine.id}`)).status, 200, 'a member deletes their own');
});

t.test('apply: the caller’s own change (triggers run on it), the comment rendered with Liquid, side effects', async (t) => {
  const team = await teamOfThree(app, services);
  const { base, asMember, owner } = team;
  await mustCreate(owner.live, `${base}/triggers`, {
    name: 'Pending waits',
    on: ['ticket.updated'],
    conditions: { all: [{ field: 'status', operator: 'changed_to', value: 'pending' }] },
    actions: [{ type: 'add_tags', value: ['waiting'] }],
  });
  await mustCreate(owner.live, `${base}/fields/ticket`, { key: 'plan', label: 'Plan', type: 'text' });
  const m = await macro(owner.live, base, {
    name: 'Ask for details',
    actions: [
      { type: 'set_status', value: 'pending' },
      { type: 'add_tags', value: ['Asked'] },
      { type: 'assign', value: team.member.id },
      { type: 'add_note', value: 'Asked {{ customer.name }} on plan {{ ticket.customFields.plan }}' },
    ],
    comment: { body: 'Hi {{ customer.name }}, about “{{ ticket.title }}” ({{ ticket.status }}): {{ assignee.name }} at {{ brand.name }} needs details.' },
  });
  const ticket = await makeTicket(owner.live, base, { title: 'Printer on fire', customerEmail: 'pat@example.com', customerName: 'Pat', customFields: { plan: 'gold' } });
  const res = await asMember('POST', `${base}/macros/${m.id}/apply`, { ticketId: ticket.id });
  t.equal(res.status, 200, JSON.stringify(res.body));
  const [result] = res.body.data;
  t.match(result, { ticketId: ticket.id, ok: true, ticket: { status: 'pending', assigneeId: team.member.id } });
  t.same(names(result.ticket), ['asked', 'waiting'], 'the macro’s tag and the trigger’s, which ran on the change');
  t.match(result.comment, {
    body: 'Hi Pat, about “Printer on fire” (pending): Mo Member at Desk needs details.',
    isInternal: false,
    authorType: 'AGENT',
    authorId: team.member.id,
    metadata: { macro: { id: m.id, name: 'Ask for details' } },
  });
  const comments = (await db('comments').where({ ticketId: ticket.id }).orderBy('id')) as { body: string; isInternal: boolean }[];
  t.same(
    comments.map((c) => [c.body, c.isInternal]),
    [
      [result.comment.body, false],
      ['Asked Pat on plan gold', true],
    ],
    'the reply, then the note of its add_note',
  );
  const entries = await db('auditLog').where({ ticketId: ticket.id }).orderBy('id');
  const update = entries.find((e) => e.event === 'ticket.updated' && e.source !== 'automation');
  t.match(update, { performerType: 'user', performerId: team.member.id }, 'the update is the member’s own');
  t.ok(
    entries.some((e) => e.source === 'automation'),
    'the trigger fired on it',
  );
  t.match(
    entries.find((e) => e.event === 'macro.applied'),
    { entityId: m.id, performerId: team.member.id },
  );
  t.ok((await db('mailMessages').where({ ticketId: ticket.id })).length > 0, 'the public reply is mailed to the customer');
});

t.test('apply to many: one transaction per ticket, results in order, a failing ticket leaves the others applied', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const m = await macro(owner.live, base, {
    name: 'Greet',
    actions: [{ type: 'set_priority', value: 'urgent' }],
    comment: { body: '{% if customer %}Hello {{ customer.name }}{% endif %}', isInternal: true },
  });
  const first = await makeTicket(owner.live, base, { title: 'One', customerEmail: 'a@example.com', customerName: 'Ann' });
  // No customer: the comment renders empty, so this ticket fails, its priority kept as it was.
  const nameless = await makeTicket(owner.live, base, { title: 'Two', priority: 'low' });
  const last = await makeTicket(owner.live, base, { title: 'Three', customerEmail: 'b@example.com', customerName: 'Bo' });
  const otherBrand = await makeBrand(owner.live, 'Other desk');
  const elsewhere = await makeTicket(owner.live, `/v1/brands/${otherBrand.id}`, { title: 'Elsewhere' });
  const ticketIds = [first.id, nameless.id, 'tkt_missing', elsewhere.id, last.id];
  const res = await owner.live('POST', `${base}/macros/${m.id}/apply`, { ticketIds });
  t.equal(res.status, 200);
  t.same(
    res.body.data.map((r: { ticketId: string; ok: boolean; error?: { code: string } }) => [r.ticketId, r.ok, r.error?.code ?? null]),
    [
      [first.id, true, null],
      [nameless.id, false, 'empty_comment'],
      ['tkt_missing', false, 'not_found'],
      [elsewhere.id, false, 'not_found'],
      [last.id, true, null],
    ],
  );
  t.match(res.body.data[0], { ticket: { priority: 'urgent' }, comment: { body: 'Hello Ann', isInternal: true } });
  t.match((await owner.live('GET', `${base}/tickets/${first.id}`)).body, { priority: 'urgent' }, 'the first stays applied');
  t.match((await owner.live('GET', `${base}/tickets/${nameless.id}`)).body, { priority: 'low' }, 'the failed one is as it was');
  t.equal((await db('comments').where({ ticketId: nameless.id })).length, 0);
  t.match((await owner.live('GET', `/v1/brands/${otherBrand.id}/tickets/${elsewhere.id}`)).body, { priority: null }, 'another brand’s ticket is untouched');
  assertErrorShape(t, await owner.live('POST', `${base}/macros/${m.id}/apply`, { ticketId: first.id, ticketIds: [last.id] }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', `${base}/macros/${m.id}/apply`, {}), 400, 'validation_failed');
});

/** Every table's row count and the ticket's row as stored: what a write would change. */
async function snapshot(ticketId: string) {
  // Rate limit counters are the limiter's, kept on a timer whatever the request.
  const tables = (await db.raw(`select tablename from pg_tables where schemaname = 'public' and tablename <> 'rate_limit_counters' order by 1`)).rows.map(
    (r: { tablename: string }) => r.tablename,
  );
  const counts: Record<string, number> = {};
  for (const table of tables) counts[table] = Number((await db.raw(`select count(*) as n from ??`, [table])).rows[0].n);
  return { counts, ticket: await db('tickets').where({ id: ticketId }).first(), tags: await db('ticketTags').where({ ticketId }).orderBy('tagId') };
}

t.test('preview: the ticket and comment as they would become, and nothing written', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  await mustCreate(owner.live, `${base}/triggers`, {
    name: 'Urgent gets a tag',
    on: ['ticket.updated'],
    conditions: { all: [{ field: 'priority', operator: 'changed_to', value: 'urgent' }] },
    actions: [{ type: 'add_tags', value: ['hot'] }],
  });
  const m = await macro(owner.live, base, {
    name: 'Escalate',
    actions: [
      { type: 'set_priority', value: 'urgent' },
      { type: 'add_tags', value: ['brand-new-tag'] },
      { type: 'add_note', value: 'Escalated' },
    ],
    comment: { body: 'We are on it, {{ customer.name }}: {{ ticket.title }} is {{ ticket.priority }}.' },
  });
  const ticket = await makeTicket(owner.live, base, { title: 'Outage', customerEmail: 'ceo@example.com', customerName: 'Cy' });
  const before = await snapshot(ticket.id);
  const res = await owner.live('POST', `${base}/macros/${m.id}/preview`, { ticketId: ticket.id });
  t.equal(res.status, 200, JSON.stringify(res.body));
  t.match(res.body.ticket, { id: ticket.id, priority: 'urgent' });
  t.same(names(res.body.ticket), ['brand-new-tag', 'hot'], 'the brand’s triggers are seen too');
  t.same(res.body.comment, { body: 'We are on it, Cy: Outage is urgent.', isInternal: false });
  t.same(await snapshot(ticket.id), before, 'no row of any table changed');
  t.same((await owner.live('GET', `${base}/tickets/${ticket.id}`)).body, ticket, 'the ticket reads as before');
  assertNotFound(t, await owner.live('POST', `${base}/macros/${m.id}/preview`, { ticketId: 'tkt_missing' }), 'a ticket that is not there');
});

t.test('out of scope: another account, another brand, the other mode read a macro as 404', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const m = await macro(owner.live, base, { name: 'Private', actions: [{ type: 'set_priority', value: 'low' }] });
  const ticket = await makeTicket(owner.live, base);
  const attempts = await outsiders(app, owner, base);
  for (const [label, call, prefix] of attempts) {
    assertNotFound(t, await call('GET', `${prefix}/macros/${m.id}`), `${label}: get`);
    assertNotFound(t, await call('PATCH', `${prefix}/macros/${m.id}`, { name: 'Mine' }), `${label}: patch`);
    assertNotFound(t, await call('DELETE', `${prefix}/macros/${m.id}`), `${label}: delete`);
    assertNotFound(t, await call('POST', `${prefix}/macros/${m.id}/apply`, { ticketId: ticket.id }), `${label}: apply`);
    assertNotFound(t, await call('POST', `${prefix}/macros/${m.id}/preview`, { ticketId: ticket.id }), `${label}: preview`);
  }
  t.match((await owner.live('GET', `/v1/brands/${brand.id}/macros/${m.id}`)).body, { name: 'Private' }, 'still there');
});
