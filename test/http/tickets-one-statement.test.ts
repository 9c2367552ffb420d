import t from 'tap';
import { assertErrorShape, makeBrand, mustCreate, ownerWithBrand, statementsDuring, testApp } from '../helpers/app.js';

/**
 * Ticket create has two ways (server/domains/tickets/service.ts): the usual create in ONE
 * statement, and step by step for everything else (new tags, watchers, pending attachments, a
 * custom-field schema, every error, replays). These tests hold the one-statement way to what the
 * step-by-step way does: same ticket, same audit entries and webhook deliveries, nothing written
 * when a check fails, and correct under concurrency.
 */

// Loopback webhook URLs need webhookAllowPrivate (no delivery runs here: only outbox rows are read).
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000', TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true' });

const contactRows = (brandId: string, email: string) => db('contacts').where({ brandId, email }).select('id');
const auditOf = (brandId: string, event: string) => db('auditLog').where({ brandId, event }).orderBy('id').select('*');

t.test('the usual create is one statement; a new tag, watchers or a replay go step by step', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  await mustCreate(owner.live, `${base}/tags`, { name: 'vip' });
  const category = await mustCreate(owner.live, `${base}/categories`, { name: 'Billing' });
  const body = { title: 'Hello', body: 'b', customerEmail: 'new@example.com', tags: ['vip'], priority: 'high', categoryId: category.id, assigneeId: owner.ownerId };

  const sent = async (what: string, expected: number, request: () => Promise<{ status: number }>) => {
    let status = 0;
    const statements = await statementsDuring(db, async () => {
      status = (await request()).status;
    });
    t.equal(status, expected, `${what}: ${expected}`);
    return statements;
  };
  const usual = await sent('the usual create', 201, () => owner.live('POST', `${base}/tickets`, body, { 'x-idempotency-key': 'one' }));
  t.equal(usual.length, 1, 'one statement, no BEGIN or COMMIT');
  const replay = await sent('a replay', 200, () => owner.live('POST', `${base}/tickets`, body, { 'x-idempotency-key': 'one' }));
  t.ok(replay.includes('BEGIN;'), 'a replay goes step by step');
  const newTag = await sent('a new tag', 201, () => owner.live('POST', `${base}/tickets`, { ...body, tags: ['brand-new'] }));
  t.ok(newTag.includes('BEGIN;'), 'a new tag name goes step by step');
  const withWatchers = await sent('watchers', 201, () => owner.live('POST', `${base}/tickets`, { ...body, watchers: [{ memberId: owner.ownerId }] }));
  t.ok(withWatchers.includes('BEGIN;'), 'watchers go step by step');
  const again = await sent('the new tag, now known', 201, () => owner.live('POST', `${base}/tickets`, { ...body, tags: ['Brand-New', 'vip'] }));
  t.equal(again.length, 1, 'a tag that exists by now, named in another case: one statement');
});

t.test('a brand with a service level: its usual creates are one statement too, each with its dueAt', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  t.equal((await owner.live('PATCH', base, { slaEnabled: true, slaByPriority: { urgent: 4 } })).status, 200);
  const create = async () => {
    let created: { dueAt: string | null; createdAt: string } | null = null;
    const statements = await statementsDuring(db, async () => {
      created = (await owner.live('POST', `${base}/tickets`, { title: 'Urgent', priority: 'urgent' })).body;
    });
    return { statements, created: created! as { dueAt: string | null; createdAt: string } };
  };
  const first = await create();
  t.ok(first.statements.includes('BEGIN;'), 'the first create of the level in this process goes step by step (it reads the brand)');
  const second = await create();
  t.equal(second.statements.length, 1, 'the next ones: one statement');
  for (const { created } of [first, second]) t.ok(Math.abs(Date.parse(created.dueAt!) - Date.parse(created.createdAt) - 4 * 3_600_000) < 5000, 'dueAt: 4 h after creation');
  t.equal((await owner.live('PATCH', base, { slaByPriority: { urgent: 1 } })).status, 200);
  const changed = await create();
  t.ok(Math.abs(Date.parse(changed.created.dueAt!) - Date.parse(changed.created.createdAt) - 3_600_000) < 5000, 'a changed level applies at once');
});

t.test('a brand with a ticket schema: its creates are checked against it, and soon go straight to step by step', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  t.equal((await owner.live('PUT', `${base}/schema`, { schema: { type: 'object', properties: { orderId: { type: 'string' } }, required: ['orderId'] } })).status, 200);
  assertErrorShape(t, await owner.live('POST', `${base}/tickets`, { title: 'no order id' }), 400, 'invalid_custom_fields');
  let status = 0;
  const statements = await statementsDuring(db, async () => {
    status = (await owner.live('POST', `${base}/tickets`, { title: 'with order id', customFields: { orderId: 'A-1' } })).status;
  });
  t.equal(status, 201);
  t.equal(statements[0], 'BEGIN;', 'no one-statement attempt that could only fall back');
  t.equal((await owner.live('DELETE', `${base}/schema`)).status, 200, 'schema cleared');
  const created = await owner.live('POST', `${base}/tickets`, { title: 'no schema now' });
  t.equal(created.status, 201, 'a create right after works (step by step until the hint expires)');
});

t.test('both ways write the same ticket, audit entries and webhook deliveries', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  await mustCreate(owner.live, `${base}/webhooks`, { url: 'http://127.0.0.1:9/hook', events: ['ticket.created'] });
  await mustCreate(owner.live, `${base}/companies`, { name: 'Acme', domain: 'acme.com' });
  await mustCreate(owner.live, `${base}/tags`, { name: 'existing' });
  const input = (email: string, tag: string) => ({
    title: ' Same ',
    body: 'Body',
    customerEmail: email,
    customerName: 'Ann',
    tags: [tag],
    priority: 'urgent',
    status: 'pending',
    links: [{ url: 'https://example.com/1' }],
    customFields: { a: [1, { b: true }] },
    metadata: { m: 1 },
    source: 'email',
    sourceId: 's-1',
    sourceData: { inbox: 'x' },
    createdBy: 'agent-1',
    dueAt: '2030-01-02T03:04:05.678Z',
  });
  const oneStatement = await mustCreate(owner.live, `${base}/tickets`, input('ann@acme.com', 'existing'));
  const stepByStep = await mustCreate(owner.live, `${base}/tickets`, input('bob@acme.com', 'fresh')); // a new tag: step by step

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const comparable = (v: Record<string, any>) => ({
    ...v,
    id: 'x',
    ticketNumber: 0,
    createdAt: 'x',
    updatedAt: 'x',
    customerId: 'x',
    customer: { ...v.customer, id: 'x', email: 'x' },
    tags: v.tags.map((g: { color: string }) => ({ color: g.color })),
  });
  t.same(comparable(oneStatement), comparable(stepByStep), 'the same view');
  t.equal(oneStatement.customer.company.name, 'Acme', 'the new contact was linked to the company of its domain');
  t.equal(oneStatement.title, 'Same');

  // The list's sort and search columns, which a trigger derives from the contact (new in both cases).
  const derived = async (id: string) => db('tickets').where({ id }).first('customerText', 'customerSort', 'companySort');
  t.same(await derived(oneStatement.id), { customerText: 'Ann ann@acme.com', customerSort: 'ann', companySort: 'acme' }, 'derived from the contact made by the same statement');
  t.same(await derived(stepByStep.id), { customerText: 'Ann bob@acme.com', customerSort: 'ann', companySort: 'acme' }, 'step by step likewise');
  const found = await owner.live('GET', `${base}/tickets?search=ann@acme.com`);
  t.equal(found.body.data[0]?.id, oneStatement.id, "search finds it by its new customer's email, ranked first");

  for (const [what, ticket, email] of [
    ['one statement', oneStatement, 'ann@acme.com'],
    ['step by step', stepByStep, 'bob@acme.com'],
  ] as const) {
    const created = (await auditOf(brand.id, 'ticket.created')).filter((e) => e.entityId === ticket.id);
    t.equal(created.length, 1, `${what}: one ticket.created entry`);
    t.match(created[0], { ticketId: ticket.id, performerType: 'api', source: 'api', metadata: { title: 'Same' } }, `${what}: who and what`);
    const contactEntries = (await auditOf(brand.id, 'contact.created')).filter((e) => e.entityId === ticket.customerId);
    t.equal(contactEntries.length, 1, `${what}: one contact.created entry`);
    t.same(contactEntries[0].metadata, { email }, `${what}: the contact entry names the email`);
    t.ok(contactEntries[0].id < created[0].id, `${what}: the contact's entry comes before the ticket's`);
    const deliveries = await db('outbox').where({ brandId: brand.id, event: 'ticket.created' }).whereRaw("payload -> 'data' ->> 'id' = ?", [ticket.id]);
    t.equal(deliveries.length, 1, `${what}: one ticket.created delivery`);
    t.match(deliveries[0].payload.data, { id: ticket.id, ticketNumber: ticket.ticketNumber, customerEmail: email, customerName: 'Ann' }, `${what}: the delivery's body`);
  }
  // The step-by-step create first tried one statement, which wrote nothing (its tag was new): no delivery either.
  t.equal((await db('outbox').where({ brandId: brand.id })).length, 2, 'one delivery per ticket, none for the attempt');
});

t.test('the derived columns a create fills are those of the rows it names, by their definition', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  await mustCreate(owner.live, `${base}/companies`, { name: 'Umlaut GmbH', domain: 'umlaut.example' });
  const category = await mustCreate(owner.live, `${base}/categories`, { name: 'Réclamations' });
  await mustCreate(owner.live, `${base}/tags`, { name: 'known' });
  await mustCreate(owner.live, `${base}/tickets`, { title: 'makes the contact', customerEmail: 'old@umlaut.example', customerName: 'Ödön Old' });
  const full = { body: 'Crème brûlée, order #42-b', categoryId: category.id, assigneeId: owner.ownerId, tags: ['known'] };
  const created = await Promise.all(
    [
      { title: 'Lone; existing contact', customerEmail: 'OLD@umlaut.example', ...full },
      { title: 'Batched, new contact', customerEmail: 'new@umlaut.example', customerName: 'Zoë New', ...full },
      { title: 'Batched, no contact, no name', ...full, assigneeId: undefined, categoryId: undefined },
      { title: '!!!', customerEmail: 'nameless@elsewhere.example' }, // no word in the title
      { title: 'Step by step (new tag)', customerEmail: 'new@umlaut.example', ...full, tags: ['brand-new'] },
    ].map((input) => mustCreate(owner.live, `${base}/tickets`, input)),
  );

  const columns = ['customer_text', 'customer_sort', 'company_sort', 'assignee_sort', 'category_sort', 'search_vector'];
  const ids = created.map((c) => c.id as string);
  // What the names are by definition, read afresh from the rows the tickets point at.
  const rows = await db.raw(
    `select t.id, ${columns.map((c) => `t.${c}::text as ${c}`).join(', ')},
      coalesce(ticketd_person_text(c.name, c.email), '') as copy_customer_text, coalesce(ticketd_person_sort(c.name, c.email), '') as copy_customer_sort,
      coalesce(lower(co.name), '') as copy_company_sort, coalesce(ticketd_person_sort(m.name, m.email), '') as copy_assignee_sort,
      coalesce(lower(ca.name), '') as copy_category_sort,
      ticketd_ticket_vector(t.title, coalesce(ticketd_person_text(c.name, c.email), ''), t.body)::text as copy_search_vector
    from tickets t
    left join contacts c on c.account_id = t.account_id and c.livemode = t.livemode and c.brand_id = t.brand_id and c.id = t.customer_id
    left join companies co on co.account_id = c.account_id and co.livemode = c.livemode and co.brand_id = c.brand_id and co.id = c.company_id
    left join members m on m.account_id = t.account_id and m.id = t.assignee_id
    left join categories ca on ca.account_id = t.account_id and ca.livemode = t.livemode and ca.brand_id = t.brand_id and ca.id = t.category_id
    where t.id = any(?) order by t.id`,
    [ids],
  );
  t.equal(rows.rows.length, ids.length);
  for (const row of rows.rows) {
    for (const c of columns) t.equal(row[c], row[`copy_${c}`], `${row.id}: ${c}`);
  }
  const lone = rows.rows.find((r: { id: string }) => r.id === ids[0]);
  t.match(lone, { customer_sort: 'ödön old', company_sort: 'umlaut gmbh', category_sort: 'réclamations', customer_text: 'Ödön Old old@umlaut.example' }, 'filled, not left empty');
  t.match(lone.search_vector, /'creme'.*'odon'/, "search words folded, the customer's included");
  t.equal((await owner.live('GET', `${base}/tickets?search=zoe&sort=customer`)).body.data.length, 2, "found by the new contact's name");
});

t.test('an existing contact is reused and gets no new entry; a blocked sender makes spam', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const first = await mustCreate(owner.live, `${base}/tickets`, { title: 'one', customerEmail: 'Repeat@Example.com' });
  const second = await mustCreate(owner.live, `${base}/tickets`, { title: 'two', customerEmail: 'repeat@example.com' });
  t.equal(second.customerId, first.customerId, 'the same contact');
  t.equal((await auditOf(brand.id, 'contact.created')).length, 1, 'created once');
  await mustCreate(owner.live, `${base}/blocked-sources`, { value: 'spam.example' });
  const spam = await mustCreate(owner.live, `${base}/tickets`, { title: 'buy', customerEmail: 'x@mail.spam.example' });
  t.equal(spam.isSpam, true, 'a sender under a blocked domain');
});

t.test('a failed check writes nothing: no contact, no key, no number, no entry', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const stranger = await ownerWithBrand(app);
  const foreignTag = await mustCreate(stranger.owner.live, `${stranger.base}/tags`, { name: 'theirs' });
  const foreignCategory = await mustCreate(stranger.owner.live, `${stranger.base}/categories`, { name: 'Theirs' });
  const cases: [string, Record<string, unknown>, string][] = [
    ['an unknown status', { status: 'nope' }, 'invalid_status'],
    ["another brand's category", { categoryId: foreignCategory.id }, 'invalid_category'],
    ['an assignee of another account', { assigneeId: stranger.owner.ownerId }, 'invalid_assignee'],
    ["another brand's tag id", { tags: [foreignTag.id] }, 'invalid_tags'],
  ];
  for (const [what, extra, code] of cases) {
    const email = `${code}@example.com`;
    const res = await owner.live('POST', `${base}/tickets`, { title: 'x', customerEmail: email, ...extra }, { 'x-idempotency-key': code });
    assertErrorShape(t, res, 400, code);
    t.equal((await contactRows(brand.id, email)).length, 0, `${what}: no contact was made`);
    t.equal((await db('idempotency_keys').where({ key: code })).length, 0, `${what}: the key is not used up`);
  }
  const key = { 'x-idempotency-key': 'taken' };
  await mustCreate(owner.live, `${base}/tickets`, { title: 'first' }, key);
  assertErrorShape(t, await owner.live('POST', `${base}/tickets`, { title: 'other', customerEmail: 'late@example.com' }, key), 409, 'idempotency_key_reused');
  t.equal((await contactRows(brand.id, 'late@example.com')).length, 0, 'a reused key makes no contact');

  const ticket = await mustCreate(owner.live, `${base}/tickets`, { title: 'next' });
  t.equal(ticket.ticketNumber, 1001, 'no number was used by the failed creates');
  t.equal((await auditOf(brand.id, 'ticket.created')).length, 2, 'two tickets, two entries');
});

t.test('concurrent one-statement creates: consecutive numbers, one contact per new email, no deadlock', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  await mustCreate(owner.live, `${base}/tags`, { name: 'shared' });
  const results = await Promise.all(
    Array.from({ length: 40 }, (_, i) => owner.live('POST', `${base}/tickets`, { title: `t${i}`, customerEmail: `c${i % 4}@new.example`, tags: ['shared'] })),
  );
  t.same(
    results.map((r) => r.status),
    Array(40).fill(201),
    'all created',
  );
  t.same(
    results.map((r) => r.body.ticketNumber).sort((a, b) => a - b),
    Array.from({ length: 40 }, (_, i) => 1000 + i),
    'consecutive, no gaps, no duplicates',
  );
  t.equal(new Set(results.map((r) => r.body.customerId)).size, 4, 'one contact per email');
  t.equal((await auditOf(brand.id, 'contact.created')).length, 4, 'one contact.created entry per contact');
  t.equal((await db('ticket_tags').where({ brandId: brand.id })).length, 40, 'every ticket linked to the tag');
});

t.test('50 concurrent identical requests with one key and a new customer: one ticket, one contact', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  await mustCreate(owner.live, `${base}/tags`, { name: 'race' });
  const key = { 'x-idempotency-key': 'same-one' };
  const results = await Promise.all(
    Array.from({ length: 50 }, () => owner.live('POST', `${base}/tickets`, { title: 'Only once', customerEmail: 'first-time@example.com', tags: ['race'] }, key)),
  );
  t.equal(results.filter((r) => r.status === 201).length, 1, 'one 201');
  t.equal(results.filter((r) => r.status === 200).length, 49, '49 replays');
  t.equal(new Set(results.map((r) => r.body.id)).size, 1, 'every caller got the same ticket');
  t.equal((await db('tickets').where({ brandId: brand.id })).length, 1, 'one ticket');
  t.equal((await contactRows(brand.id, 'first-time@example.com')).length, 1, 'one contact');
});

/** The creates' statement (writeStatement), among the statements a test saw. */
const createStatements = (statements: string[]) => statements.filter((s) => s.includes('::jsonb) as i(ord int')).length;

t.test('concurrent creates across brands go together (group commit): each ticket numbered, announced and recorded as if alone', async (t) => {
  const owner = (await ownerWithBrand(app)).owner;
  const brandIds: string[] = [];
  for (let b = 0; b < 3; b++) {
    const brand = await makeBrand(owner.live, `Batch ${b}`);
    brandIds.push(brand.id);
    await mustCreate(owner.live, `/v1/brands/${brand.id}/webhooks`, { url: 'http://127.0.0.1:9/hook', events: ['ticket.created'] });
    await mustCreate(owner.live, `/v1/brands/${brand.id}/tags`, { name: 'vip' });
  }
  let results: { status: number; body: any }[] = []; // eslint-disable-line @typescript-eslint/no-explicit-any
  const statements = await statementsDuring(db, async () => {
    results = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        owner.live(
          'POST',
          `/v1/brands/${brandIds[i % 3]}/tickets`,
          { title: `t${i}`, customerEmail: i % 2 ? `shared@b${i % 3}.example` : `own${i}@b${i % 3}.example`, customerName: `Name ${i}`, tags: ['vip'], priority: 'high' },
          { 'x-idempotency-key': `batch-${i}` },
        ),
      ),
    );
  });
  t.same(
    results.map((r) => r.status),
    Array(30).fill(201),
    'all created',
  );
  const sent = createStatements(statements);
  t.ok(sent >= 2 && sent < 30, `30 creates took ${sent} statements`);

  for (const [b, brandId] of brandIds.entries()) {
    const mine = results.filter((_, i) => i % 3 === b).map((r) => r.body);
    t.same(
      mine.map((x) => x.ticketNumber).sort((x, y) => x - y),
      Array.from({ length: 10 }, (_, i) => 1000 + i),
      `brand ${b}: consecutive numbers`,
    );
    const shared = mine.filter((x) => x.customer.email === `shared@b${b}.example`);
    t.equal(new Set(shared.map((x) => x.customerId)).size, 1, `brand ${b}: the shared email is one contact`);
    t.equal((await auditOf(brandId, 'contact.created')).length, 1 + mine.length - shared.length, `brand ${b}: one contact.created entry per contact`);
    const entries = await auditOf(brandId, 'ticket.created');
    t.same(entries.map((e) => e.entityId).sort(), mine.map((x) => x.id).sort(), `brand ${b}: one ticket.created entry per ticket`);
    const deliveries = await db('outbox').where({ brandId, event: 'ticket.created' });
    t.equal(deliveries.length, 10, `brand ${b}: one delivery per ticket`);
    for (const x of mine) {
      const body = deliveries.find((d) => d.payload.data.id === x.id)?.payload.data;
      t.match(body, { ticketNumber: x.ticketNumber, customerEmail: x.customer.email, title: x.title }, `brand ${b}: ${x.title}'s delivery`);
    }
  }
  const one = results[4]!.body;
  t.same(one, (await owner.live('GET', `/v1/brands/${brandIds[1]}/tickets/${one.id}`)).body, 'a response is the ticket as GET shows it');
  t.same(
    one.tags.map((g: { name: string }) => g.name),
    ['vip'],
  );
});

t.test('in a batch, a create that fails a check fails alone; a replayed key replays', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const stranger = await ownerWithBrand(app);
  const foreignTag = await mustCreate(stranger.owner.live, `${stranger.base}/tags`, { name: 'theirs' });
  const earlier = await mustCreate(owner.live, `${base}/tickets`, { title: 'earlier' }, { 'x-idempotency-key': 'replayed' });
  const bodies: [Record<string, unknown>, Record<string, string>][] = [
    ...Array.from({ length: 8 }, (_, i): [Record<string, unknown>, Record<string, string>] => [
      { title: `good ${i}`, customerEmail: `good${i}@example.com` },
      { 'x-idempotency-key': `good-${i}` },
    ]),
    [{ title: 'bad status', customerEmail: 'bad1@example.com', status: 'nope' }, { 'x-idempotency-key': 'bad-1' }],
    [{ title: 'foreign tag', customerEmail: 'bad2@example.com', tags: [foreignTag.id] }, {}],
    [{ title: 'earlier' }, { 'x-idempotency-key': 'replayed' }],
    [{ title: 'other body' }, { 'x-idempotency-key': 'good-0' }],
  ];
  const results = await Promise.all(bodies.map(([body, headers]) => owner.live('POST', `${base}/tickets`, body, headers)));
  t.same(
    results.slice(0, 8).map((r) => r.status),
    Array(8).fill(201),
    'the good creates are made',
  );
  assertErrorShape(t, results[8]!, 400, 'invalid_status');
  assertErrorShape(t, results[9]!, 400, 'invalid_tags');
  t.equal(results[10]!.status, 200, 'the replay answers 200');
  t.equal(results[10]!.body.id, earlier.id, 'with the earlier ticket');
  assertErrorShape(t, results[11]!, 409, 'idempotency_key_reused');
  t.same(
    results
      .slice(0, 8)
      .map((r) => r.body.ticketNumber)
      .sort((a, b) => a - b),
    Array.from({ length: 8 }, (_, i) => 1001 + i),
    'no number lost to the failures',
  );
  t.equal((await contactRows(brand.id, 'bad1@example.com')).length + (await contactRows(brand.id, 'bad2@example.com')).length, 0, 'the failed creates made no contact');
  t.equal((await db('idempotency_keys').where({ key: 'bad-1' })).length, 0, 'nor used up their key');
  t.equal((await auditOf(brand.id, 'ticket.created')).length, 9, 'one entry per ticket made');
});
