import t, { type Test } from 'tap';
import { assertErrorShape, assertNotFound, client, makeBrand, makeTicket, mustCreate, type Reply, servicesOf, signup, testApp } from '../helpers/app.js';
import { sessionToken } from '../helpers/sign-in.js';

/**
 * The hosted product's two real clients, route by route: what each reads, asked with the credential
 * it calls with. The dashboard signs in (a member's session) and its reads are those of the
 * dashboard facts (dashboard-client-facts.md, by section); the SDK and integrations send an API key
 * and read what the compat contract records (compat-contract.md, by section); both portal clients
 * send a portal token. A change that breaks what one client reads fails here, naming the client.
 * Where the two read different shapes, the credential picks (docs/decisions/0095).
 */

const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });

let people = 0;
/** An account with a live brand, its owner's API key (the SDK) and the owner's session (the dashboard). */
async function bothClients() {
  const email = `contracts-${process.pid}-${++people}@example.com`;
  const owner = await signup(app, email);
  const brand = await makeBrand(owner.live);
  return {
    owner,
    brand,
    base: `/v1/brands/${brand.id}`,
    sdk: owner.live,
    dashboard: client(app, await sessionToken(app, servicesOf(db), owner.accountId, email)),
  };
}

// ---------------------------------------------------------------------------------------------
// Records as each client reads them, written as the two files write them: a field's JSON type, and
// `?` when it may be absent or null.

type Kind = 'string' | 'number' | 'boolean' | 'object' | 'array';
type Field = Kind | `${Kind}?` | Shape | Maybe | List;
interface Shape {
  [field: string]: Field;
}
class Maybe {
  constructor(readonly field: Field) {}
}
class List {
  constructor(readonly item: Field) {}
}
/** May be absent or null; when there, as described. */
const maybe = (field: Field) => new Maybe(field);
const list = (item: Field) => new List(item);

/** Where `value` is not what `field` says, each as "path: what it is". */
function problemsOf(value: unknown, field: Field, at: string): string[] {
  if (field instanceof Maybe) return value === undefined || value === null ? [] : problemsOf(value, field.field, at);
  if (field instanceof List) return Array.isArray(value) ? value.flatMap((v, i) => problemsOf(v, field.item, `${at}[${i}]`)) : [`${at}: not an array`];
  if (typeof field === 'string') {
    if (field.endsWith('?')) return problemsOf(value, maybe(field.slice(0, -1) as Kind), at);
    const kind = Array.isArray(value) ? 'array' : value === null ? 'null' : typeof value;
    return kind === field ? [] : [`${at}: ${kind}, not ${field}`];
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [`${at}: not an object`];
  return Object.entries(field).flatMap(([name, f]) => problemsOf((value as Record<string, unknown>)[name], f, `${at}.${name}`));
}

/** The assertion of this file: `who` reads `value` as `field`, on `route`. */
function reads(t: Test, who: 'dashboard' | 'SDK' | 'portal clients', route: string, res: Reply, status: number, field: Field): void {
  t.equal(res.status, status, `${who}: ${route} answers ${status}`, { body: res.body });
  t.same(problemsOf(res.body, field, 'body'), [], `${who} reads ${route}`);
}

/** compat-contract.md: what the SDK (an API key) reads; sections 1 and 3 unless said. */
const SDK = (() => {
  const category = { id: 'string', brandId: 'string', name: 'string', color: 'string', description: 'string?', sortOrder: 'number', createdAt: 'string' } as const;
  const tag = { id: 'string', brandId: 'string', name: 'string', color: 'string', createdAt: 'string' } as const;
  const company = {
    id: 'string',
    brandId: 'string',
    name: 'string',
    domain: 'string?',
    metadata: 'object?',
    createdAt: 'string',
    updatedAt: 'string',
    _count: maybe({ customers: 'number' }),
  } as const;
  const customer = {
    id: 'string',
    brandId: 'string',
    email: 'string',
    name: 'string?',
    avatarUrl: 'string?',
    companyId: 'string?',
    company: maybe('object'),
    metadata: 'object?',
    createdAt: 'string',
    updatedAt: 'string',
    _count: maybe({ tickets: 'number' }),
  } as const;
  const ticket = {
    id: 'string',
    brandId: 'string',
    ticketNumber: 'number',
    title: 'string',
    body: 'string?',
    status: 'string',
    // Typed as an enumeration; ticketd's may be null (known, left).
    priority: 'string?',
    assigneeId: 'string?',
    createdBy: 'string?',
    customerId: 'string?',
    customer: maybe({ id: 'string', email: 'string' }),
    categoryId: 'string?',
    category: maybe({ id: 'string', name: 'string' }),
    tags: maybe(list({ id: 'string', name: 'string' })),
    links: maybe(list({ url: 'string' })),
    metadata: 'object?',
    source: 'string',
    sourceId: 'string?',
    sourceData: 'object?',
    commentCount: 'number',
    attachmentCount: 'number',
    isSpam: 'boolean',
    createdAt: 'string',
    updatedAt: 'string',
    deletedAt: 'string?',
    mergedIntoId: 'string?',
  } as const;
  const comment = {
    id: 'string',
    ticketId: 'string',
    body: 'string',
    authorId: 'string?',
    authorName: 'string?',
    authorType: 'string',
    parentId: 'string?',
    links: 'array?',
    metadata: 'object?',
    source: 'string',
    sourceId: 'string?',
    sourceData: 'object?',
    createdAt: 'string',
    updatedAt: 'string',
    deletedAt: 'string?',
    replies: maybe(list('object')),
  } as const;
  const attachment = {
    id: 'string',
    ticketId: 'string',
    commentId: 'string?',
    filename: 'string',
    contentType: 'string',
    size: 'number',
    status: 'string',
    uploadedBy: 'string?',
    metadata: 'object?',
    createdAt: 'string',
    updatedAt: 'string',
  } as const;
  const apiKey = { id: 'string', name: 'string', keyPreview: 'string', allBrands: 'boolean', brandIds: list('string'), lastUsedAt: 'string?', createdAt: 'string' } as const;
  return {
    page: (item: Field): Shape => ({ data: list(item), pagination: { cursor: 'string?', hasMore: 'boolean' } }),
    brand: {
      id: 'string',
      accountId: 'string',
      name: 'string',
      slug: 'string',
      ticketPrefix: 'string?',
      nextTicketNumber: 'number',
      url: 'string?',
      iconUrl: 'string?',
      settings: 'object?',
      metadata: 'object?',
      inboundEmailEnabled: 'boolean',
      autoresponseEnabled: 'boolean',
      autoresponseSubject: 'string?',
      autoresponseBody: 'string?',
      fromName: 'string?',
      fromEmail: 'string?',
      portalOrigins: list('string'),
      createdAt: 'string',
      updatedAt: 'string',
    },
    deletePreview: { ticketCount: 'number', webhookCount: 'number', categoryCount: 'number', tagCount: 'number' },
    ticket,
    comment,
    attachment,
    downloadable: { ...attachment, downloadUrl: 'string' },
    uploadGrant: { attachmentId: 'string', uploadUrl: 'string', expiresIn: 'number' },
    webhook: {
      id: 'string',
      brandId: 'string',
      url: 'string',
      events: list('string'),
      enabled: 'boolean',
      failureCount: 'number',
      lastTriggered: 'string?',
      lastFailure: 'string?',
      createdAt: 'string',
      updatedAt: 'string',
    },
    category,
    tag,
    customer,
    company,
    field: {
      key: 'string',
      label: 'string',
      type: 'string',
      required: 'boolean',
      description: 'string?',
      placeholder: 'string?',
      options: maybe(list('string')),
      visible: 'boolean',
      sortOrder: 'number',
      source: 'string?',
      createdAt: 'string?',
    },
    apiKey,
    newApiKey: { ...apiKey, key: 'string' },
    success: { success: 'boolean' },
    usage: { ticketsThisMonth: 'number', ticketsTotal: 'number', brandsCount: 'number', plan: maybe({ name: 'string', ticketLimit: 'number?', brandLimit: 'number?' }) },
    portalToken: { token: 'string', expiresAt: 'string', customerId: 'string', email: 'string', name: 'string?' },
  } as const;
})();

/** dashboard-client-facts.md: what the dashboard (a member's session) reads, by section. */
const DASHBOARD = (() => {
  const named = { id: 'string', name: 'string', color: 'string?' } as const;
  const company = {
    id: 'string',
    brandId: 'string',
    name: 'string',
    domain: 'string?',
    metadata: 'object?',
    createdAt: 'string',
    updatedAt: 'string',
    _count: { customers: 'number' },
  } as const;
  const contact = {
    id: 'string',
    brandId: 'string',
    email: 'string',
    name: 'string?',
    avatarUrl: 'string?',
    companyId: 'string?',
    company: maybe({ name: 'string' }),
    metadata: 'object?',
    notifyEmail: 'boolean?',
    createdAt: 'string',
    updatedAt: 'string',
    _count: { tickets: 'number' },
  } as const;
  const apiKey = {
    id: 'string',
    name: 'string',
    prefix: 'string',
    createdAt: 'string',
    lastUsedAt: 'string?',
    expiresAt: 'string?',
    allBrands: 'boolean',
    brandIds: list('string'),
  } as const;
  return {
    // §0.4
    page: (item: Field): Shape => ({ data: list(item), pagination: { hasMore: 'boolean', nextCursor: 'string?' } }),
    // §4
    brand: {
      id: 'string',
      accountId: 'string',
      slug: 'string',
      name: 'string',
      ticketPrefix: 'string?',
      nextTicketNumber: 'number',
      createdAt: 'string',
      updatedAt: 'string',
      settings: 'object?',
      metadata: 'object?',
      url: 'string?',
      iconUrl: 'string?',
      autoresponseEnabled: 'boolean?',
      csatEnabled: 'boolean?',
      csatType: 'string?',
      csatDelayMinutes: 'number?',
      slaEnabled: 'boolean?',
      slaByPriority: 'object?',
      portalOrigins: maybe(list('string')),
    },
    // §8.1: the relations embedded in lists and single reads alike; commentCount is required.
    ticket: {
      id: 'string',
      brandId: 'string',
      ticketNumber: 'number',
      title: 'string',
      body: 'string?',
      status: 'string?',
      statusRef: maybe({ id: 'string', key: 'string', name: 'string', color: 'string' }),
      closeReason: 'string?',
      priority: 'string?',
      source: 'string',
      assigneeId: 'string?',
      customerId: 'string?',
      customer: maybe({ id: 'string', email: 'string', name: 'string?', avatarUrl: 'string?', companyId: 'string?', company: maybe({ id: 'string', name: 'string' }) }),
      categoryId: 'string?',
      category: maybe(named),
      tags: maybe(list(named)),
      customFields: 'object?',
      metadata: 'object?',
      links: 'array?',
      createdBy: 'string?',
      commentCount: 'number',
      attachmentCount: 'number?',
      dueAt: 'string?',
      isSpam: 'boolean?',
      createdAt: 'string',
      updatedAt: 'string',
    },
    // §8.4
    merge: { targetTicketId: 'string', mergedTicketIds: list('string'), mergedCount: 'number' },
    // §9
    comment: {
      id: 'string',
      ticketId: 'string',
      authorId: 'string?',
      authorType: 'string',
      body: 'string',
      metadata: { authorName: 'string?', isInternal: 'boolean?' },
      createdAt: 'string',
      updatedAt: 'string',
    },
    // §10
    attachment: { id: 'string', filename: 'string', contentType: 'string', size: 'number', status: 'string', createdAt: 'string', updatedAt: 'string' },
    // §7
    category: { ...named, brandId: 'string', description: 'string?', sortOrder: 'number', createdAt: 'string', updatedAt: 'string' },
    tag: { ...named, brandId: 'string', createdAt: 'string', updatedAt: 'string' },
    // §6
    field: {
      key: 'string',
      label: 'string',
      type: 'string',
      required: 'boolean',
      description: 'string?',
      placeholder: 'string?',
      options: maybe(list('string')),
      showOnCreate: 'boolean',
      showInTable: 'boolean',
      showInDetail: 'boolean',
      sortOrder: 'number',
      createdAt: 'string',
    },
    // §11, §12
    contact,
    contactHit: { id: 'string', email: 'string', name: 'string?', avatarUrl: 'string?', company: maybe({ id: 'string', name: 'string' }) },
    company,
    // §16
    apiKey,
    newApiKey: { ...apiKey, key: 'string' },
    success: { success: 'boolean' },
    // §2
    usage: { ticketCount: 'number', brandCount: 'number', billingPeriodStart: 'string?', planLimit: 'number?', brandLimit: 'number?' },
    // §19.2 (minted server side with an API key)
    portalToken: { token: 'string', expiresAt: 'string', customerId: 'string', email: 'string', name: 'string?' },
  } as const;
})();

/** The portal, as both portal clients read it (compat contract §4, dashboard facts §19.3). */
const PORTAL = (() => {
  const file = { id: 'string', filename: 'string', contentType: 'string', size: 'number', status: 'string' } as const;
  const ticket = {
    id: 'string',
    ticketNumber: 'number',
    title: 'string',
    body: 'string?',
    status: 'string',
    priority: 'string?',
    commentCount: 'number?',
    createdAt: 'string',
    updatedAt: 'string',
    brand: { name: 'string', ticketPrefix: 'string?' },
  } as const;
  const comment = { id: 'string', body: 'string', authorType: 'string', authorName: 'string?', authorId: 'string?', createdAt: 'string' } as const;
  return {
    // Both spellings of the page: the SDK's pagination and the interface spec's tickets key.
    page: { data: list(ticket), tickets: list(ticket), pagination: { hasMore: 'boolean', nextCursor: 'string?' } },
    ticket,
    detail: { ...ticket, comments: list(comment) },
    comment,
    file,
    files: list(file),
    upload: { attachment: file, uploadUrl: 'string', expiresAt: 'string' },
    download: { attachment: file, downloadUrl: 'string' },
    token: { token: 'string', expiresAt: 'string', customerId: 'string', email: 'string', name: 'string?' },
  } as const;
})();

for (const [what, path] of [
  ['category', 'categories'],
  ['tag', 'tags'],
] as const) {
  t.test(`GET …/${path}/stats: the dashboard reads a list, the SDK an object keyed by ${what} id`, async (t) => {
    const { sdk, dashboard, base } = await bothClients();
    t.same((await dashboard('GET', `${base}/${path}/stats`)).body, [], 'dashboard: none yet, an empty list');
    t.same((await sdk('GET', `${base}/${path}/stats`)).body, {}, 'SDK: none yet, an empty object');
    const quiet = await mustCreate(sdk, `${base}/${path}`, { name: 'Alpha', color: '#111111' });
    const busy = await mustCreate(sdk, `${base}/${path}`, { name: 'Beta' });
    const on = what === 'category' ? { categoryId: busy.id } : { tags: [busy.id] };
    for (const title of ['One', 'Two']) await makeTicket(sdk, base, { title, ...on });
    const counts = [
      { id: quiet.id, name: 'Alpha', color: '#111111', ticketCount: 0 },
      { id: busy.id, name: 'Beta', color: '#6b7280', ticketCount: 2 },
    ];

    for (const prefix of ['/v1/brands', '/v1/workspaces']) {
      const url = `${base.replace('/v1/brands', prefix)}/${path}/stats`;
      // dashboard facts §7: the settings page calls .find on [{ id, name, color, ticketCount }].
      const listed = await dashboard('GET', url);
      t.equal(listed.status, 200);
      t.same(listed.body, counts, `dashboard (session), ${prefix}: a list, in the order the settings page shows`);
      // compat contract §3: { [id]: { ticketCount } }, with the fields the dashboard reads beside it.
      const keyed = await sdk('GET', url);
      t.equal(keyed.status, 200);
      t.same(keyed.body, { [quiet.id]: counts[0], [busy.id]: counts[1] }, `SDK (API key), ${prefix}: keyed by ${what} id`);
    }

    const stranger = await signup(app);
    const elsewhere = `/v1/brands/${(await makeBrand(stranger.live)).id}/${path}/stats`;
    assertNotFound(t, await dashboard('GET', elsewhere), "dashboard: another account's brand");
    assertNotFound(t, await sdk('GET', elsewhere), "SDK: another account's brand");
  });
}

t.test('POST …/tickets/bulk: the dashboard reads { success, failed } as numbers, the SDK { success: boolean, count }', async (t) => {
  const { sdk, dashboard, base } = await bothClients();
  const [a, b, c] = [await makeTicket(sdk, base), await makeTicket(sdk, base), await makeTicket(sdk, base)];
  const gone = 'tkt_00000000000000000000000000';

  // dashboard facts §8.5: both counts are toasted.
  const shown = await dashboard('POST', `${base}/tickets/bulk`, { action: 'resolve', ticketIds: [a.id, b.id, gone] });
  t.equal(shown.status, 200);
  t.same(shown.body, { success: 2, count: 2, failed: 1, failedIds: [gone] }, 'dashboard (session): success and failed are numbers');

  // compat contract §4: { success, count }; the SDK tests success === true.
  const all = await sdk('POST', `${base}/tickets/bulk`, { action: 'close', ticketIds: [a.id, c.id] });
  t.same(all.body, { success: true, count: 2, failed: 0, failedIds: [] }, 'SDK (API key): every ticket acted on, success is true');
  const some = await sdk('POST', `${base}/tickets/bulk`, { action: 'close', ticketIds: [b.id, gone] });
  t.same(some.body, { success: false, count: 1, failed: 1, failedIds: [gone] }, 'SDK (API key): an id it could not act on makes success false');

  for (const [who, call] of [
    ['dashboard', dashboard],
    ['SDK', sdk],
  ] as const) {
    assertErrorShape(t, await call('POST', `${base}/tickets/bulk`, { action: 'explode', ticketIds: [a.id] }), 400, 'validation_failed');
    const stranger = await signup(app);
    assertNotFound(
      t,
      await call('POST', `/v1/brands/${(await makeBrand(stranger.live)).id}/tickets/bulk`, { action: 'resolve', ticketIds: [a.id] }),
      `${who}: another account's brand`,
    );
  }
});

t.test('comments: the dashboard reads metadata.authorName and one flat list, the SDK authorName and threads', async (t) => {
  const { sdk, dashboard, base } = await bothClients();
  const comments = `${base}/tickets/${(await makeTicket(sdk, base)).id}/comments`;
  // dashboard facts §9: what the dashboard sends; compat contract §3: what the SDK sends.
  const fromDashboard = await mustCreate(dashboard, comments, { body: 'On it', authorType: 'AGENT', authorName: 'Ann', metadata: { authorName: 'Ann' } });
  const fromSdk = await mustCreate(sdk, comments, { body: 'Synced from the CRM', authorName: 'CRM bot' });
  const reply = await mustCreate(sdk, comments, { body: 'Customer answered', authorType: 'CUSTOMER', authorName: 'Cleo', parentId: fromDashboard.id });

  // dashboard facts §9: a bare array, oldest first, the last element the newest; labelled by metadata.authorName.
  const shown = (await dashboard('GET', comments)).body;
  t.same(
    shown.map((c: { id: string; metadata: { authorName: string } }) => [c.id, c.metadata.authorName]),
    [
      [fromDashboard.id, 'Ann'],
      [fromSdk.id, 'CRM bot'],
      [reply.id, 'Cleo'],
    ],
    'dashboard (session): every comment in one list, the newest last, each named in metadata',
  );
  t.match(shown[0], { authorId: String, authorType: 'AGENT', body: 'On it', createdAt: String }, 'dashboard (session): the comment it posted names the member');
  t.equal(fromSdk.metadata.authorName, 'CRM bot', 'dashboard: the create answer of an SDK comment carries metadata.authorName');

  // compat contract §3: authorName at the top level, replies? nested.
  const read = (await sdk('GET', comments)).body;
  t.same(
    read.map((c: { id: string; authorName: string }) => [c.id, c.authorName]),
    [
      [fromDashboard.id, 'Ann'],
      [fromSdk.id, 'CRM bot'],
    ],
    'SDK (API key): top-level comments with authorName',
  );
  t.match(read[0].replies, [{ id: reply.id, parentId: fromDashboard.id, authorName: 'Cleo' }], 'SDK (API key): the reply in its thread');
  t.match(await sdk('DELETE', `${base}/comments/${reply.id}`), { status: 200, body: { id: reply.id, deletedAt: String, authorName: 'Cleo' } }, 'SDK: delete returns the comment');
});

// ---------------------------------------------------------------------------------------------
// Route by route: every route both clients read, each asked as its client asks.

/** A PUT of the bytes to an upload URL, as a browser or the SDK sends it (no credentials: the URL is the grant). */
async function upload(uploadUrl: string, bytes = 'hello'): Promise<number> {
  const url = new URL(uploadUrl);
  return (await app.inject({ method: 'PUT', url: url.pathname + url.search, headers: { 'content-type': 'text/plain' }, payload: bytes })).statusCode;
}

t.test('brands: list, create, read, update, delete', async (t) => {
  const { sdk, dashboard, base } = await bothClients();
  reads(t, 'SDK', 'GET /brands', await sdk('GET', '/v1/brands'), 200, list(SDK.brand));
  reads(t, 'dashboard', 'GET /brands', await dashboard('GET', '/v1/brands'), 200, list(DASHBOARD.brand));
  // compat contract §3 and dashboard facts §4: POST /brands sends { name, slug }.
  const made = await sdk('POST', '/v1/brands', { name: 'SDK brand', slug: `sdk-brand-${process.pid}` });
  reads(t, 'SDK', 'POST /brands', made, 201, SDK.brand);
  const shown = await dashboard('POST', '/v1/brands', { name: 'Dashboard brand', slug: `dashboard-brand-${process.pid}` });
  reads(t, 'dashboard', 'POST /brands', shown, 201, DASHBOARD.brand);
  reads(t, 'SDK', 'GET /brands/:b', await sdk('GET', base), 200, SDK.brand);
  reads(t, 'dashboard', 'GET /brands/:b', await dashboard('GET', base), 200, DASHBOARD.brand);
  reads(t, 'SDK', 'PATCH /brands/:b', await sdk('PATCH', base, { name: 'Renamed', ticketPrefix: 'RN' }), 200, SDK.brand);
  reads(t, 'dashboard', 'PATCH /brands/:b', await dashboard('PATCH', base, { name: 'Renamed again', ticketPrefix: 'RA', csatEnabled: true }), 200, DASHBOARD.brand);
  reads(t, 'SDK', 'DELETE /brands/:b (the preview)', await sdk('DELETE', `/v1/brands/${made.body.id}`), 200, SDK.deletePreview);
  t.equal((await dashboard('DELETE', `/v1/brands/${shown.body.id}?confirm=true`)).status, 200, 'dashboard: DELETE ?confirm=true deletes (the owner)');
  for (const [who, call] of [
    ['dashboard', dashboard],
    ['SDK', sdk],
  ] as const) {
    assertErrorShape(t, await call('PATCH', base, { ticketPrefix: 42 }), 400, 'validation_failed');
    assertNotFound(t, await call('GET', `/v1/brands/${shown.body.id}`), `${who}: a deleted brand`);
  }
});

t.test('tickets: create, list, read, update, spam, merge, delete', async (t) => {
  const { sdk, dashboard, base } = await bothClients();
  const category = await mustCreate(sdk, `${base}/categories`, { name: 'Billing' });
  const tag = await mustCreate(sdk, `${base}/tags`, { name: 'vip' });
  // compat contract §3: the create input; dashboard facts §8.4: what the create dialog sends.
  const fromSdk = await sdk('POST', `${base}/tickets`, {
    title: 'From the SDK',
    body: 'Hi',
    priority: 'high',
    customerEmail: 'cleo@example.com',
    categoryId: category.id,
    tags: [tag.id],
  });
  reads(t, 'SDK', 'POST /brands/:b/tickets', fromSdk, 201, SDK.ticket);
  const fromDashboard = await dashboard('POST', `${base}/tickets`, {
    title: 'From the dashboard',
    body: 'Hello',
    priority: 'normal',
    source: 'web',
    customFields: { requesterName: 'Dee', requesterEmail: 'dee@example.com' },
    notifyCustomer: false,
  });
  reads(t, 'dashboard', 'POST /brands/:b/tickets', fromDashboard, 201, DASHBOARD.ticket);

  reads(t, 'SDK', 'GET /brands/:b/tickets', await sdk('GET', `${base}/tickets?limit=10`), 200, SDK.page(SDK.ticket));
  // dashboard facts §0.8: the notifier's poll.
  const polled = await dashboard('GET', `${base}/tickets?limit=20&status=active`);
  reads(t, 'dashboard', 'GET /brands/:b/tickets', polled, 200, DASHBOARD.page(DASHBOARD.ticket));
  t.match(
    polled.body.data.find((x: { id: string }) => x.id === fromSdk.body.id),
    { customer: { email: 'cleo@example.com' }, category: { id: category.id, name: 'Billing' }, tags: [{ id: tag.id, name: 'vip' }] },
    'dashboard (§8.1): relations embedded in the list',
  );
  const one = `${base}/tickets/${fromSdk.body.id}`;
  reads(t, 'SDK', 'GET /brands/:b/tickets/:t', await sdk('GET', one), 200, SDK.ticket);
  reads(t, 'dashboard', 'GET /brands/:b/tickets/:t', await dashboard('GET', one), 200, DASHBOARD.ticket);
  reads(t, 'SDK', 'PATCH /brands/:b/tickets/:t', await sdk('PATCH', one, { priority: 'urgent', categoryId: null }), 200, SDK.ticket);
  // dashboard facts §7: tags are written by name.
  const patched = await dashboard('PATCH', one, { tags: ['vip', 'refund'], status: 'pending', assigneeId: null });
  reads(t, 'dashboard', 'PATCH /brands/:b/tickets/:t', patched, 200, DASHBOARD.ticket);
  t.same(patched.body.tags.map((x: { name: string }) => x.name).sort(), ['refund', 'vip'], 'dashboard: tags read back as objects');
  reads(t, 'SDK', 'POST …/spam', await sdk('POST', `${one}/spam`, { isSpam: true }), 200, SDK.ticket);
  reads(t, 'dashboard', 'POST …/spam', await dashboard('POST', `${one}/spam`, { isSpam: false }), 200, DASHBOARD.ticket);

  const [x, y] = [await makeTicket(sdk, base), await makeTicket(sdk, base)];
  reads(t, 'dashboard', 'POST …/merge', await dashboard('POST', `${one}/merge`, { sourceTicketIds: [x.id] }), 200, DASHBOARD.merge);
  reads(t, 'SDK', 'POST …/merge', await sdk('POST', `${one}/merge`, { sourceTicketIds: [y.id] }), 200, SDK.ticket);
  reads(t, 'SDK', 'DELETE /brands/:b/tickets/:t', await sdk('DELETE', one), 200, { ...SDK.ticket, deletedAt: 'string' });
  t.equal((await dashboard('DELETE', `${base}/tickets/${fromDashboard.body.id}`)).status, 200, 'dashboard: DELETE answers 200');
  for (const [who, call] of [
    ['dashboard', dashboard],
    ['SDK', sdk],
  ] as const) {
    assertErrorShape(t, await call('POST', `${base}/tickets`, { title: 'Bad', priority: 'extreme' }), 400, 'validation_failed');
    assertNotFound(t, await call('GET', one), `${who}: a deleted ticket`);
  }
});

t.test('comments: create, list, update, delete, with the fields each client reads', async (t) => {
  const { sdk, dashboard, base } = await bothClients();
  const comments = `${base}/tickets/${(await makeTicket(sdk, base)).id}/comments`;
  const fromSdk = await sdk('POST', comments, { body: 'From the SDK', authorName: 'CRM bot', authorType: 'AGENT' });
  reads(t, 'SDK', 'POST …/comments', fromSdk, 201, SDK.comment);
  const fromDashboard = await dashboard('POST', comments, {
    body: 'From the dashboard',
    authorType: 'AGENT',
    authorName: 'Ann',
    metadata: { authorName: 'Ann', isInternal: true },
  });
  reads(t, 'dashboard', 'POST …/comments', fromDashboard, 201, DASHBOARD.comment);
  reads(t, 'SDK', 'GET …/comments', await sdk('GET', comments), 200, list(SDK.comment));
  reads(t, 'dashboard', 'GET …/comments', await dashboard('GET', comments), 200, list(DASHBOARD.comment));
  reads(t, 'SDK', 'GET /comments/:c', await sdk('GET', `${base}/comments/${fromSdk.body.id}`), 200, SDK.comment);
  reads(t, 'SDK', 'PATCH /comments/:c', await sdk('PATCH', `${base}/comments/${fromSdk.body.id}`, { body: 'Edited' }), 200, SDK.comment);
  const edited = await dashboard('PATCH', `${comments}/${fromDashboard.body.id}`, { body: 'Edited too', metadata: { authorName: 'Ann', isInternal: true } });
  reads(t, 'dashboard', 'PATCH …/comments/:c', edited, 200, DASHBOARD.comment);
  reads(t, 'SDK', 'DELETE /comments/:c', await sdk('DELETE', `${base}/comments/${fromSdk.body.id}`), 200, { ...SDK.comment, deletedAt: 'string' });
  t.equal((await dashboard('DELETE', `${comments}/${fromDashboard.body.id}`)).status, 200, 'dashboard: DELETE answers 200');
  for (const call of [dashboard, sdk]) assertErrorShape(t, await call('POST', comments, { body: '   ' }), 400, 'validation_failed');
});

t.test('attachments: the SDK uploads in three steps; both list, read and delete', async (t) => {
  const { sdk, dashboard, base } = await bothClients();
  const files = `${base}/tickets/${(await makeTicket(sdk, base)).id}/attachments`;
  const grant = await sdk('POST', files, { filename: 'notes.txt', contentType: 'text/plain', size: 5 });
  reads(t, 'SDK', 'POST …/attachments', grant, 201, SDK.uploadGrant);
  t.ok(new URL(grant.body.uploadUrl).protocol.startsWith('http'), 'SDK: the upload URL is absolute');
  t.equal(await upload(grant.body.uploadUrl), 200, 'SDK: PUT the bytes, no credentials');
  const confirmed = await sdk('POST', `${files}/${grant.body.attachmentId}/confirm`);
  reads(t, 'SDK', 'POST …/attachments/:a/confirm', confirmed, 200, SDK.attachment);
  t.equal(confirmed.body.status, 'UPLOADED', "SDK: the contract's status");
  const one = `${files}/${grant.body.attachmentId}`;
  reads(t, 'SDK', 'GET …/attachments', await sdk('GET', files), 200, list(SDK.attachment));
  reads(t, 'dashboard', 'GET …/attachments', await dashboard('GET', files), 200, list(DASHBOARD.attachment));
  reads(t, 'SDK', 'GET …/attachments/:a', await sdk('GET', one), 200, SDK.downloadable);
  reads(t, 'dashboard', 'GET …/attachments/:a', await dashboard('GET', one), 200, { attachment: DASHBOARD.attachment, downloadUrl: 'string' });
  reads(t, 'SDK', 'DELETE …/attachments/:a', await sdk('DELETE', one), 200, SDK.attachment);
  assertNotFound(t, await dashboard('DELETE', one), 'dashboard: an attachment already deleted');
  assertErrorShape(t, await sdk('POST', files, { filename: 'x.txt', contentType: 'text/plain', size: -1 }), 400, 'validation_failed');
});

t.test('webhooks: the SDK registers and reads them; the dashboard counts them', async (t) => {
  const { sdk, dashboard, base } = await bothClients();
  // A public IP literal: accepted without DNS, and never called (no dispatcher runs here).
  const made = await sdk('POST', `${base}/webhooks`, { url: 'https://93.184.215.14/hook', secret: 'a-secret-of-sixteen+', events: ['ticket.created'] });
  reads(t, 'SDK', 'POST /webhooks', made, 201, SDK.webhook);
  reads(t, 'SDK', 'GET /webhooks', await sdk('GET', `${base}/webhooks`), 200, list(SDK.webhook));
  reads(t, 'SDK', 'GET /webhooks/:w', await sdk('GET', `${base}/webhooks/${made.body.id}`), 200, SDK.webhook);
  // dashboard facts §15: the setup status counts the bare array; its own create sends no secret.
  const listed = await dashboard('GET', `${base}/webhooks`);
  reads(t, 'dashboard', 'GET /webhooks', listed, 200, list('object'));
  t.equal(listed.body.length, 1, 'dashboard: the length it counts');
  const theirs = await dashboard('POST', `${base}/webhooks`, { url: 'https://93.184.215.14/other', events: ['ticket.created'] });
  t.equal(theirs.status, 201, 'dashboard: POST without a secret');
  t.equal((await dashboard('DELETE', `${base}/webhooks/${theirs.body.id}`)).status, 200, 'dashboard: DELETE');
  reads(t, 'SDK', 'DELETE /webhooks/:w', await sdk('DELETE', `${base}/webhooks/${made.body.id}`), 200, SDK.webhook);
  assertErrorShape(t, await sdk('POST', `${base}/webhooks`, { url: 'not a url', events: ['ticket.created'] }), 400, 'invalid_webhook_url');
});

t.test('categories and tags: create, list, update, reorder, merge, delete', async (t) => {
  const { sdk, dashboard, base } = await bothClients();
  const billing = await sdk('POST', `${base}/categories`, { name: 'Billing', color: '#112233' });
  reads(t, 'SDK', 'POST /categories', billing, 201, SDK.category);
  const bugs = await dashboard('POST', `${base}/categories`, { name: 'Bugs', color: '#445566', description: 'Broken things' });
  reads(t, 'dashboard', 'POST /categories', bugs, 201, DASHBOARD.category);
  reads(t, 'SDK', 'GET /categories', await sdk('GET', `${base}/categories`), 200, list(SDK.category));
  reads(t, 'dashboard', 'GET /categories', await dashboard('GET', `${base}/categories`), 200, list(DASHBOARD.category));
  reads(t, 'SDK', 'PATCH /categories/:c', await sdk('PATCH', `${base}/categories/${billing.body.id}`, { name: 'Invoices' }), 200, SDK.category);
  reads(t, 'dashboard', 'PATCH /categories/:c', await dashboard('PATCH', `${base}/categories/${bugs.body.id}`, { name: 'Bugs', color: '#778899' }), 200, DASHBOARD.category);
  const order = { categoryIds: [bugs.body.id, billing.body.id] };
  reads(t, 'SDK', 'POST /categories/reorder', await sdk('POST', `${base}/categories/reorder`, order), 200, list(SDK.category));
  reads(t, 'dashboard', 'POST /categories/reorder', await dashboard('POST', `${base}/categories/reorder`, order), 200, list(DASHBOARD.category));
  t.equal((await dashboard('DELETE', `${base}/categories/${bugs.body.id}`)).status, 200, 'dashboard: DELETE a category');
  t.equal((await sdk('DELETE', `${base}/categories/${billing.body.id}`)).status, 200, 'SDK: DELETE a category');

  const vip = await sdk('POST', `${base}/tags`, { name: 'vip', color: '#aabbcc' });
  reads(t, 'SDK', 'POST /tags', vip, 201, SDK.tag);
  // dashboard facts §7: the ticket page creates tags with only a name.
  const vip2 = await dashboard('POST', `${base}/tags`, { name: 'VIP customer' });
  reads(t, 'dashboard', 'POST /tags', vip2, 201, DASHBOARD.tag);
  reads(t, 'SDK', 'GET /tags', await sdk('GET', `${base}/tags`), 200, list(SDK.tag));
  reads(t, 'dashboard', 'GET /tags', await dashboard('GET', `${base}/tags`), 200, list(DASHBOARD.tag));
  reads(t, 'dashboard', 'PATCH /tags/:t', await dashboard('PATCH', `${base}/tags/${vip2.body.id}`, { name: 'Very important', color: '#ddeeff' }), 200, DASHBOARD.tag);
  const spare = [await mustCreate(sdk, `${base}/tags`, { name: 'spare-1' }), await mustCreate(sdk, `${base}/tags`, { name: 'spare-2' })];
  // Two spellings of a merge: the SDK's (compat contract §3) and the dashboard's (dashboard facts §7).
  reads(t, 'SDK', 'POST /tags/:target/merge', await sdk('POST', `${base}/tags/${vip.body.id}/merge`, { sourceTagIds: [spare[0].id] }), 200, SDK.tag);
  reads(t, 'dashboard', 'POST /tags/merge', await dashboard('POST', `${base}/tags/merge`, { targetTagId: vip.body.id, sourceTagIds: [spare[1].id] }), 200, DASHBOARD.tag);
  t.equal((await dashboard('DELETE', `${base}/tags/${vip2.body.id}`)).status, 200, 'dashboard: DELETE a tag');
  for (const call of [dashboard, sdk]) assertErrorShape(t, await call('POST', `${base}/categories`, { name: 'Odd', color: 'red' }), 400, 'validation_failed');
});

t.test('field definitions: the SDK says customer, the dashboard contact', async (t) => {
  const { sdk, dashboard, base } = await bothClients();
  const fromSdk = await sdk('POST', `${base}/fields/customer`, { key: 'plan', label: 'Plan', type: 'select', options: ['free', 'pro'] });
  reads(t, 'SDK', 'POST /fields/customer', fromSdk, 201, SDK.field);
  // dashboard facts §6: the create form's body.
  const fromDashboard = await dashboard('POST', `${base}/fields/contact`, {
    key: 'region',
    label: 'Region',
    type: 'text',
    required: false,
    showOnCreate: true,
    showInTable: false,
    showInDetail: true,
  });
  reads(t, 'dashboard', 'POST /fields/contact', fromDashboard, 201, DASHBOARD.field);
  reads(t, 'SDK', 'GET /fields', await sdk('GET', `${base}/fields`), 200, { ticket: list(SDK.field), customer: list(SDK.field), company: list(SDK.field) });
  reads(t, 'dashboard', 'GET /fields', await dashboard('GET', `${base}/fields`), 200, {
    ticket: list(DASHBOARD.field),
    contact: list(DASHBOARD.field),
    company: list(DASHBOARD.field),
  });
  reads(t, 'SDK', 'GET /fields/customer', await sdk('GET', `${base}/fields/customer`), 200, list(SDK.field));
  reads(t, 'dashboard', 'GET /fields/contact', await dashboard('GET', `${base}/fields/contact`), 200, list(DASHBOARD.field));
  reads(t, 'SDK', 'PATCH /fields/customer/:key', await sdk('PATCH', `${base}/fields/customer/plan`, { label: 'Plan name' }), 200, SDK.field);
  reads(
    t,
    'dashboard',
    'PATCH /fields/contact/:key',
    await dashboard('PATCH', `${base}/fields/contact/region`, { label: 'Area', type: 'text', required: false, showOnCreate: false, showInTable: true, showInDetail: true }),
    200,
    DASHBOARD.field,
  );
  reads(t, 'SDK', 'POST /fields/customer/reorder', await sdk('POST', `${base}/fields/customer/reorder`, { keys: ['region', 'plan'] }), 200, list(SDK.field));
  t.equal((await dashboard('DELETE', `${base}/fields/contact/region`)).status, 200, 'dashboard: DELETE');
  t.equal((await sdk('DELETE', `${base}/fields/customer/plan`)).status, 200, 'SDK: DELETE');
  assertErrorShape(t, await dashboard('POST', `${base}/fields/contact`, { key: 'Bad Key', label: 'x', type: 'text' }), 400, 'validation_failed');
});

t.test('contacts: the SDK calls them customers, the dashboard contacts', async (t) => {
  const { sdk, dashboard, base } = await bothClients();
  const company = await dashboard('POST', `${base}/companies`, { name: 'Initech', domain: 'initech.example' });
  reads(t, 'dashboard', 'POST /companies', company, 201, DASHBOARD.company);
  const fromSdk = await sdk('POST', `${base}/customers`, { email: 'peter@initech.example', name: 'Peter' });
  reads(t, 'SDK', 'POST /customers', fromSdk, 201, SDK.customer);
  const fromDashboard = await dashboard('POST', `${base}/contacts`, { email: 'milton@initech.example', name: 'Milton', companyId: company.body.id });
  reads(t, 'dashboard', 'POST /contacts', fromDashboard, 201, DASHBOARD.contact);
  reads(t, 'SDK', 'GET /customers', await sdk('GET', `${base}/customers?limit=10&sort=name&order=asc`), 200, SDK.page(SDK.customer));
  reads(t, 'dashboard', 'GET /contacts', await dashboard('GET', `${base}/contacts`), 200, DASHBOARD.page(DASHBOARD.contact));
  reads(t, 'SDK', 'GET /customers/search', await sdk('GET', `${base}/customers/search?q=pe`), 200, list(SDK.customer));
  const hits = await dashboard('GET', `${base}/contacts/search?q=mi`);
  reads(t, 'dashboard', 'GET /contacts/search', hits, 200, list(DASHBOARD.contactHit));
  t.match(hits.body, [{ email: 'milton@initech.example', company: { id: company.body.id, name: 'Initech' } }], 'dashboard: the company embedded in a hit');
  reads(t, 'SDK', 'GET /customers/:c', await sdk('GET', `${base}/customers/${fromSdk.body.id}`), 200, SDK.customer);
  reads(t, 'dashboard', 'GET /contacts/:c', await dashboard('GET', `${base}/contacts/${fromDashboard.body.id}`), 200, DASHBOARD.contact);
  reads(t, 'SDK', 'PATCH /customers/:c', await sdk('PATCH', `${base}/customers/${fromSdk.body.id}`, { name: 'Peter G.' }), 200, SDK.customer);
  reads(t, 'dashboard', 'PATCH /contacts/:c', await dashboard('PATCH', `${base}/contacts/${fromDashboard.body.id}`, { notifyEmail: false }), 200, DASHBOARD.contact);

  reads(t, 'SDK', 'GET /companies', await sdk('GET', `${base}/companies`), 200, SDK.page(SDK.company));
  reads(t, 'dashboard', 'GET /companies', await dashboard('GET', `${base}/companies`), 200, DASHBOARD.page(DASHBOARD.company));
  reads(t, 'SDK', 'GET /companies/:c', await sdk('GET', `${base}/companies/${company.body.id}`), 200, SDK.company);
  reads(t, 'dashboard', 'GET /companies/:c', await dashboard('GET', `${base}/companies/${company.body.id}`), 200, DASHBOARD.company);
  // dashboard facts §12: notes are saved in metadata.
  reads(t, 'dashboard', 'PATCH /companies/:c', await dashboard('PATCH', `${base}/companies/${company.body.id}`, { metadata: { notes: 'Big account' } }), 200, DASHBOARD.company);
  reads(t, 'SDK', 'PATCH /companies/:c', await sdk('PATCH', `${base}/companies/${company.body.id}`, { name: 'Initech Inc.' }), 200, SDK.company);
  t.equal((await dashboard('DELETE', `${base}/contacts/${fromDashboard.body.id}`)).status, 200, 'dashboard: DELETE a contact');
  t.equal((await sdk('DELETE', `${base}/customers/${fromSdk.body.id}`)).status, 200, 'SDK: DELETE a customer');
  t.equal((await dashboard('DELETE', `${base}/companies/${company.body.id}`)).status, 200, 'dashboard: DELETE a company');
  for (const call of [dashboard, sdk]) assertErrorShape(t, await call('POST', `${base}/contacts`, { email: 'not an address' }), 400, 'validation_failed');
});

t.test('API keys, and each client its usage route', async (t) => {
  const { sdk, dashboard } = await bothClients();
  const KEYS = '/v1/accounts/me/api-keys';
  reads(t, 'SDK', 'GET /accounts/me/api-keys', await sdk('GET', KEYS), 200, list(SDK.apiKey));
  reads(t, 'dashboard', 'GET /accounts/me/api-keys', await dashboard('GET', KEYS), 200, list(DASHBOARD.apiKey));
  const fromSdk = await sdk('POST', KEYS, { name: 'CI' });
  reads(t, 'SDK', 'POST /accounts/me/api-keys', fromSdk, 201, SDK.newApiKey);
  // dashboard facts §16: the name is optional, allBrands is sent.
  const fromDashboard = await dashboard('POST', KEYS, { allBrands: true });
  reads(t, 'dashboard', 'POST /accounts/me/api-keys', fromDashboard, 201, DASHBOARD.newApiKey);
  reads(t, 'SDK', 'PATCH …/scope', await sdk('PATCH', `${KEYS}/${fromSdk.body.id}/scope`, { allBrands: true }), 200, SDK.success);
  reads(t, 'dashboard', 'PATCH …/scope', await dashboard('PATCH', `${KEYS}/${fromDashboard.body.id}/scope`, { allBrands: true }), 200, DASHBOARD.success);
  t.equal((await sdk('DELETE', `${KEYS}/${fromSdk.body.id}`)).status, 200, 'SDK: DELETE, no body needed');
  reads(t, 'dashboard', 'DELETE /accounts/me/api-keys/:k', await dashboard('DELETE', `${KEYS}/${fromDashboard.body.id}`), 200, DASHBOARD.success);
  // compat contract §3 (Usage) and dashboard facts §2: two routes, one plan.
  reads(t, 'SDK', 'GET /accounts/me/usage', await sdk('GET', '/v1/accounts/me/usage'), 200, SDK.usage);
  reads(t, 'dashboard', 'GET /auth/usage', await dashboard('GET', '/v1/auth/usage'), 200, DASHBOARD.usage);
  assertErrorShape(t, await dashboard('POST', KEYS, { allBrands: 'yes' }), 400, 'validation_failed');
});

t.test('the portal: a token minted with an API key, then what both portal clients read with it', async (t) => {
  const { sdk, base } = await bothClients();
  // compat contract §4 (the SDK) and dashboard facts §19.2 (the dashboard's server route, also with an API key).
  const minted = await sdk('POST', `${base}/portal/token`, { email: 'cleo@example.com', name: 'Cleo' });
  reads(t, 'SDK', 'POST /brands/:b/portal/token', minted, 201, SDK.portalToken);
  const forSupport = await sdk('POST', `${base}/portal/token`, { email: 'cleo@example.com', name: 'Cleo', companyName: 'Acme', sourceOrgId: 'org_1' });
  reads(t, 'dashboard', 'POST /brands/:b/portal/token', forSupport, 201, DASHBOARD.portalToken);
  const portal = client(app, minted.body.token as string);

  const pending = await portal('POST', '/v1/portal/tickets/attachments/pending', { filename: 'shot.txt', contentType: 'text/plain', size: 5 });
  reads(t, 'portal clients', 'POST /portal/tickets/attachments/pending', pending, 201, PORTAL.upload);
  t.equal(await upload(pending.body.uploadUrl), 200, 'portal clients: PUT the file to uploadUrl');
  reads(t, 'portal clients', 'POST …/pending/:a/confirm', await portal('POST', `/v1/portal/tickets/attachments/pending/${pending.body.attachment.id}/confirm`), 200, PORTAL.file);
  const opened = await portal(
    'POST',
    '/v1/portal/tickets',
    { title: 'Printer', body: 'On fire', attachmentIds: [pending.body.attachment.id] },
    { 'x-idempotency-key': 'ticket-1-abc' },
  );
  reads(t, 'portal clients', 'POST /portal/tickets', opened, 201, PORTAL.ticket);
  const ticket = `/v1/portal/tickets/${opened.body.id}`;
  await mustCreate(sdk, `${base}/tickets/${opened.body.id}/comments`, { body: 'We are on it', authorName: 'Ann' });
  reads(t, 'portal clients', 'POST /portal/tickets/:t/comments', await portal('POST', `${ticket}/comments`, { body: 'Thanks' }), 201, PORTAL.comment);
  reads(t, 'portal clients', 'GET /portal/tickets', await portal('GET', '/v1/portal/tickets?limit=20'), 200, PORTAL.page);
  const detail = await portal('GET', ticket);
  reads(t, 'portal clients', 'GET /portal/tickets/:t', detail, 200, PORTAL.detail);
  t.same(
    detail.body.comments.map((c: { authorType: string; authorName: string }) => [c.authorType, c.authorName]),
    [
      ['STAFF', 'Ann'],
      ['CUSTOMER', 'Cleo'],
    ],
    'portal clients: oldest first, STAFF or CUSTOMER with a name',
  );
  reads(t, 'portal clients', 'GET /portal/tickets/:t/attachments', await portal('GET', `${ticket}/attachments`), 200, PORTAL.files);
  reads(t, 'portal clients', 'GET /portal/tickets/:t/attachments/:a', await portal('GET', `${ticket}/attachments/${pending.body.attachment.id}`), 200, PORTAL.download);
  // compat contract §4: the SDK's upload to an existing ticket.
  const later = await portal('POST', `${ticket}/attachments`, { filename: 'log.txt', contentType: 'text/plain', size: 5 });
  reads(t, 'portal clients', 'POST /portal/tickets/:t/attachments', later, 201, PORTAL.upload);
  t.equal(await upload(later.body.uploadUrl), 200);
  reads(t, 'portal clients', 'POST …/attachments/:a/confirm', await portal('POST', `${ticket}/attachments/${later.body.attachment.id}/confirm`), 200, PORTAL.file);
  reads(t, 'portal clients', 'POST /portal/refresh', await portal('POST', '/v1/portal/refresh'), 200, PORTAL.token);

  t.equal((await sdk('GET', '/v1/portal/tickets')).status, 401, 'an API key does not open the portal');
  assertNotFound(t, await portal('GET', '/v1/portal/tickets/tkt_00000000000000000000000000'), 'portal clients: a ticket not theirs');
  assertErrorShape(t, await portal('POST', '/v1/portal/tickets', { body: 'no title' }), 400, 'validation_failed');
});

t.test('the OpenAPI document names the credential of each shape of a two-shape response', async (t) => {
  const doc = (await client(app)('GET', '/v1/openapi.json')).body;
  for (const [method, path] of [
    ['get', '/v1/brands/{brandId}/categories/stats'],
    ['get', '/v1/brands/{brandId}/tags/stats'],
    ['post', '/v1/brands/{brandId}/tickets/bulk'],
    ['get', '/v1/brands/{brandId}/tickets/{ticketId}/comments'],
  ]) {
    const schema = doc.paths[path][method].responses['200'].content['application/json'].schema;
    t.equal(schema.oneOf?.length, 2, `${path}: oneOf two shapes`);
    t.match(schema.oneOf[0], { description: /^To a session \(the dashboard\)/ }, `${path}: the dashboard's shape, to a session`);
    t.match(schema.oneOf[1], { description: /^To an API key \(the SDK, integrations\)/ }, `${path}: the SDK's shape, to an API key`);
  }
});
