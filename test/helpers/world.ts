import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { keyringPart } from '../../server/core/sealed.js';
import type { Services } from '../../server/core/services.js';
import { client, makeBrand, mustCreate, signup, type Reply, type Signup } from './app.js';
import { seedOrder } from './commerce-seed.js';
import { sessionToken } from './sign-in.js';

/**
 * One account with one of every kind of object, and what it takes to call every route on them:
 * for each path parameter the id to put there (`params`), for each write route a request that
 * would succeed (`requests`), and the query a route cannot go without (`queries`). The isolation
 * sweep and the fuzz walk every route through these tables; a route they cannot fill fails them.
 *
 * Routes are named `METHOD /v1/brands/{brandId}/…` (see routeKey): the `/v1/workspaces` twin of a
 * route and Fastify's `:param` spelling name the same entry.
 */

/** Every free text of the main brand carries this word, so a response that leaks any of it is caught. */
export const MARKER = 'Zanzibar';
export const INBOUND_SECRET = 'inbound-secret-for-tests';
export const INBOUND_DOMAIN = 'inbound.ticketd.localhost';

/** A request body and the headers it needs (a JSON body needs none). */
export interface Payload {
  body?: unknown;
  headers?: Record<string, string>;
}

export const BOUNDARY = 'ticketd-world';
export const MULTIPART: Payload = {
  body: `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nabc\r\n--${BOUNDARY}--\r\n`,
  headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
};

/** A 1×1 GIF, every byte below 0x80, so it travels as a string: an avatar whose content is an image. */
export const AVATAR_GIF = 'GIF89a\u0001\u0000\u0001\u0000\u0000\u0000\u0000,\u0000\u0000\u0000\u0000\u0001\u0000\u0001\u0000\u0000\u0002\u0000;';
export const AVATAR_MULTIPART: Payload = {
  body: `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="me.gif"\r\nContent-Type: image/gif\r\n\r\n${AVATAR_GIF}\r\n--${BOUNDARY}--\r\n`,
  headers: MULTIPART.headers,
};

/** `POST /v1/workspaces/:brandId/tickets` → `POST /v1/brands/{brandId}/tickets`. */
export function routeKey(method: string, url: string): string {
  return `${method.toUpperCase()} ${url.replace(/^\/v1\/workspaces(?=\/|$)/, '/v1/brands').replace(/:(\w+)/g, '{$1}')}`;
}

/** The URL with every `{param}` or `:param` filled from `values`; an unknown parameter throws, naming the route. */
export function fillPath(url: string, values: Record<string, string>): string {
  return url.replace(/\{(\w+)\}|:(\w+)|\*/g, (whole, a: string | undefined, b: string | undefined) => {
    const name = a ?? b ?? '*';
    const value = values[name];
    if (value === undefined) throw new Error(`no value for the path parameter ${whole} of ${url}: add one to the table of parameters`);
    return value;
  });
}

export interface Account extends Signup {
  brand: { id: string };
  base: string;
}

export interface World {
  app: FastifyInstance;
  /** The account every object belongs to; its live brand holds them all. */
  owner: Account;
  /** The owner's other live brand, and a key limited to it. */
  sideBrand: { id: string };
  scoped: ReturnType<typeof client>;
  scopedKeyId: string;
  /** The owner's test-mode brand (empty). */
  testBrand: { id: string };
  /** Another account, with a live brand of its own. */
  stranger: Account;
  /** Path parameter name → the owner's id of that kind (brandId: the main brand). */
  params: Record<string, string>;
  /** Parameters that differ by route (a token is an upload grant on one route and a download grant on another). */
  paramsByRoute: Record<string, Record<string, string>>;
  /** "METHOD /v1/…" → a request that succeeds for the owner (null: the route takes no body). */
  requests: Record<string, Payload | null>;
  /** "METHOD /v1/…" → a query string the route requires. */
  queries: Record<string, string>;
  /** Ids of the main brand's objects and of keys wider than the scoped one: what no one outside may read. */
  privateIds: string[];
  /** Ids of the account as a whole (its feature-request board): any member of it may reach them, no one else. */
  accountWideIds: string[];
  /** Routes on those ids: a member of the same account is answered, whatever brands they are assigned to. */
  accountWideRoutes: string[];
  /** A key that was revoked: a well-formed credential that must be refused. */
  revokedKey: string;
  /** The token of the main brand's web form: the credential of its public URL. */
  formToken: string;
  /** A portal token of the main brand's customer (peter@…, whose ticket is ticketId). */
  portalToken: string;
  /** The origin the main brand lists in portalOrigins. */
  portalOrigin: string;
  ticketId: string;
  otherTicketId: string;
  commentId: string;
  attachmentId: string;
  tagIds: [string, string];
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function must(res: Promise<Reply>, status = 201): Promise<any> {
  const r = await res;
  if (r.status !== status) throw new Error(`world setup failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

async function account(app: FastifyInstance, brandName: string): Promise<Account> {
  const who = await signup(app);
  const brand = await makeBrand(who.live, brandName);
  return { ...who, brand, base: `/v1/brands/${brand.id}` };
}

/** The path of a signed URL (upload or download): its last segment is the token. */
const tokenOf = (url: string) => new URL(url).pathname.split('/').pop()!;

/** Path values for one route: the owner's ids, its main brand spelled as the route's family spells it (or `brandId`). */
export function pathValues(world: World, key: string, url: string, brandId = world.params.brandId!): Record<string, string> {
  return { ...world.params, ...world.paramsByRoute[key], brandId: url.startsWith('/v1/workspaces') ? brandId.replace(/^br_/, 'ws_') : brandId };
}

/** Builds the world on `app` (signup must allow a few accounts; inbound mail wants INBOUND_SECRET and the default domain). */
export async function buildWorld(app: FastifyInstance, services: Services): Promise<World> {
  const owner = await account(app, `${MARKER} brand`);
  const { live, base } = owner;
  const members = (await must(live('GET', '/v1/accounts/me/members'), 200)).data as { id: string; email: string }[];
  const memberId = members[0]!.id;
  const ownerEmail = members[0]!.email;
  const portalOrigin = 'https://portal.initech.example';
  await must(live('PATCH', base, { portalOrigins: [portalOrigin], csatEnabled: true }), 200);
  const company = await mustCreate(live, `${base}/companies`, { name: `${MARKER} Initech`, domain: 'initech.example' });
  const contact = await mustCreate(live, `${base}/contacts`, { email: 'peter@initech.example', name: `${MARKER} Peter`, companyId: company.id });
  // The contact the erase route aims at: Peter stays as he is for every other route.
  const erasable = await mustCreate(live, `${base}/contacts`, { email: 'milton@initech.example', name: `${MARKER} Milton` });
  const category = await mustCreate(live, `${base}/categories`, { name: `${MARKER} billing` });
  const tag = await mustCreate(live, `${base}/tags`, { name: `${MARKER}-vip` });
  const tag2 = await mustCreate(live, `${base}/tags`, { name: `${MARKER}-urgent` });
  const status = await mustCreate(live, `${base}/statuses`, { key: 'waiting', name: `${MARKER} waiting`, color: '#ff9900' });
  await mustCreate(live, `${base}/fields/ticket`, { key: 'plan', label: `${MARKER} plan`, type: 'text' });
  const blocked = await mustCreate(live, `${base}/blocked-sources`, { value: 'zanzibar@spam.example' });
  const ticket = await mustCreate(live, `${base}/tickets`, { title: `${MARKER} ticket`, customerEmail: 'peter@initech.example', tags: [tag.id], categoryId: category.id });
  const other = await mustCreate(live, `${base}/tickets`, { title: `${MARKER} second ticket` });
  // Peter's resolved ticket: its resolution asks for a satisfaction rating (the brand has CSAT on).
  const resolved = await mustCreate(live, `${base}/tickets`, { title: `${MARKER} resolved ticket`, customerEmail: 'peter@initech.example' });
  await must(live('PATCH', `${base}/tickets/${resolved.id}`, { status: 'resolved' }), 200);
  const comment = await mustCreate(live, `${base}/tickets/${ticket.id}/comments`, { body: `${MARKER} comment` });
  await mustCreate(live, `${base}/tickets/${ticket.id}/watchers`, { memberId });
  const attachment = (await mustCreate(live, `${base}/tickets/${ticket.id}/attachments/upload`, MULTIPART.body, MULTIPART.headers)).attachment;
  const download = await must(live('GET', `${base}/tickets/${ticket.id}/attachments/${attachment.id}`), 200);
  const grant = await mustCreate(live, `${base}/tickets/${ticket.id}/attachments`, { filename: `${MARKER}.txt`, contentType: 'text/plain', size: 3 });
  // A public IP literal: accepted without DNS, and never called (no dispatcher runs in these tests).
  const webhook = await mustCreate(live, `${base}/webhooks`, { url: 'https://93.184.215.14/zanzibar', events: ['ticket.created'] });
  await mustCreate(live, `${base}/tickets`, { title: `${MARKER} announced` });
  const form = await mustCreate(live, `${base}/forms`, { name: `${MARKER} contact form`, thankYouMessage: `${MARKER} thanks` });
  const recurring = await mustCreate(live, `${base}/recurring-tickets`, {
    title: `${MARKER} weekly check`,
    body: `${MARKER} what to look at`,
    schedule: { frequency: 'weekly', dayOfWeek: 1, timeOfDay: '09:00', timezone: 'Europe/Paris' },
  });
  // Rules that never match (their condition names text no ticket has), so the world's tickets stay as made.
  const trigger = await mustCreate(live, `${base}/triggers`, {
    name: `${MARKER} VIP`,
    on: ['ticket.created'],
    conditions: { all: [{ field: 'title', operator: 'contains', value: 'no ticket says this' }] },
    actions: [{ type: 'add_note', value: `${MARKER} {{ ticket.title }}` }],
  });
  const automation = await mustCreate(live, `${base}/automations`, {
    name: `${MARKER} close resolved`,
    conditions: {
      all: [
        { field: 'status', operator: 'is', value: 'resolved' },
        { field: 'hoursSinceResolved', operator: 'gte', value: 100000 },
      ],
    },
    actions: [{ type: 'set_status', value: 'closed' }],
  });
  // A macro and a view shared in the brand (an API key's are the brand's: personal ones are a member's).
  const macro = await mustCreate(live, `${base}/macros`, {
    name: `${MARKER} canned reply`,
    visibility: 'brand',
    actions: [{ type: 'set_priority', value: 'normal' }],
    comment: { body: `${MARKER} hello {{ customer.name }}`, isInternal: true },
  });
  const view = await mustCreate(live, `${base}/views`, {
    name: `${MARKER} urgent and unassigned`,
    visibility: 'brand',
    filters: { priority: 'urgent', assigneeId: 'unassigned' },
    sort: { field: 'updatedAt', order: 'asc' },
  });
  const mailDomain = await mustCreate(live, `${base}/domains`, { domain: `${MARKER.toLowerCase()}-mail.example` });
  // A public IP literal: accepted without DNS; a sync's connection to it fails fast (testConfig's mailboxTimeoutMs).
  const mailbox = await mustCreate(live, `${base}/email-connections`, {
    provider: 'IMAP',
    name: `${MARKER} desk`,
    email: 'desk@initech.example',
    host: '93.184.215.14',
    password: 'world-password',
  });
  const delivery = (await must(live('GET', `${base}/webhooks/${webhook.id}/deliveries`), 200))[0];
  // A ticket that came by mail: its message is kept as it arrived (raw mail).
  const mailed = await app.inject({
    method: 'POST',
    url: '/v1/inbound/email',
    payload: `From: Peter <peter@initech.example>\r\nTo: ${owner.brand.id}@${INBOUND_DOMAIN}\r\nSubject: ${MARKER} mailed\r\nMessage-ID: <world-mailed@initech.example>\r\n\r\n${MARKER}\r\n`,
    headers: { 'content-type': 'message/rfc822', authorization: `Bearer ${INBOUND_SECRET}` },
  });
  const mailedTicketId = (JSON.parse(mailed.body) as { ticketId: string }).ticketId;
  const rawMail = (await must(live('GET', `${base}/tickets/${mailedTicketId}/raw-mails`), 200))[0];
  // The customer of the main ticket, in the portal.
  const portalToken = (await mustCreate(live, `${base}/portal/token`, { email: 'peter@initech.example' })).token as string;

  // The owner is mentioned in a comment and proposes a feature request, through their own session.
  await mustCreate(live, `${base}/tickets/${other.id}/comments`, { body: `@[Owner](${memberId}) ${MARKER} mention` });
  const ownerSession = client(app, await sessionToken(app, services, owner.accountId, ownerEmail));
  const mention = (await must(ownerSession('GET', '/v1/auth/mentions/unread'), 200))[0];
  // The board is the whole account's: every member may read it, so its text carries no MARKER.
  const featureRequest = await mustCreate(ownerSession, '/v1/auth/feature-requests', { title: 'Team idea', featureDetails: 'For the whole team' });
  // A pending invitation: the routes that change a member aim at it (changing it costs the world nothing).
  const invitee = (await must(ownerSession('POST', '/v1/auth/members/invite', { email: 'world-invitee@example.com', role: 'member' }, { origin: 'http://localhost:5173' }), 200))
    .memberId;
  const TEAM_ROUTES_ON_INVITEE = [
    'POST /v1/auth/members/{memberId}/resend-invite',
    'PATCH /v1/auth/members/{memberId}',
    'DELETE /v1/auth/members/{memberId}',
    'PUT /v1/auth/members/{memberId}/brands',
  ];
  // Deleting an account is done to a throwaway organization, by its owner's session sent with the request: never to the world's.
  const doomedEmail = `doomed-${Math.random().toString(36).slice(2)}@example.com`;
  const doomedSession = await sessionToken(app, services, (await signup(app, doomedEmail)).accountId, doomedEmail);

  // Single sign-on, as PUT would store it once its issuer answered discovery (no identity provider runs here; the
  // loopback issuer is never called, and the domain is no one's address, so a start finds no organization).
  await services.db('sso_connections').insert({
    account_id: owner.accountId,
    id: 'sso_world',
    livemode: true,
    issuer: 'https://127.0.0.1:9',
    client_id: 'world',
    client_secret: await services.get(keyringPart).seal('world-secret', { purpose: 'sso_connection.client_secret', accountId: owner.accountId }),
    allowed_domains: ['sso.initech.example'],
  });

  // A connected store, as connect would save it (no store answers here: the world's server calls a
  // loopback port where nothing listens, see testConfig); its notifications' secret is world-notify-secret.
  const commerceStoreId = 'store_world';
  await services.db('commerce_stores').insert({
    account_id: owner.accountId,
    id: commerceStoreId,
    livemode: true,
    brand_id: owner.brand.id,
    platform: 'BIGCOMMERCE',
    store_hash: 'worldstore',
    name: `${MARKER} store`,
    access_token: await services.get(keyringPart).seal('world-store-token', { purpose: 'commerce_store.access_token', accountId: owner.accountId }),
    notify_secret_hash: createHash('sha256').update('world-notify-secret').digest('hex'),
  });
  // An order of Peter's in that store, as the sync leaves it, linked by hand to the main ticket.
  const order = await seedOrder(
    services.db,
    { accountId: owner.accountId, livemode: true, brandId: owner.brand.id, id: commerceStoreId },
    {
      customerEmail: 'peter@initech.example',
      customerName: `${MARKER} Peter`,
    },
  );
  await mustCreate(live, `${base}/ecommerce/orders/${order.id}/link`, { ticketId: ticket.id });

  const sideBrand = await makeBrand(live, 'Side brand');
  const scopedKey = await mustCreate(live, '/v1/accounts/me/api-keys', { name: 'Side desk', brandIds: [sideBrand.id] });
  const targetKey = await mustCreate(live, '/v1/accounts/me/api-keys', { name: `${MARKER} key` });
  const revoked = await mustCreate(live, '/v1/accounts/me/api-keys', { name: 'Revoked' });
  await must(live('DELETE', `/v1/accounts/me/api-keys/${revoked.id}`), 200);
  const ownKeys = (await must(live('GET', '/v1/accounts/me/api-keys'), 200)) as { id: string; allBrands: boolean }[];
  const testBrand = await makeBrand(owner.test, 'Owner test brand');
  const stranger = await account(app, 'Stranger brand');

  const B = '/v1/brands/{brandId}';
  const json = (body: unknown): Payload => ({ body });
  const requests: Record<string, Payload | null> = {
    'POST /v1/accounts': json({ email: 'new-owner@example.com' }),
    'POST /v1/accounts/me/api-keys': json({ name: 'Another' }),
    'PATCH /v1/accounts/me/api-keys/{keyId}/scope': json({ allBrands: true }),
    'POST /v1/accounts/me/api-keys/{keyId}/rotate': json({ graceMinutes: 5 }),
    'DELETE /v1/accounts/me/api-keys/{keyId}': null,
    'POST /v1/brands': json({ name: 'Another brand' }),
    [`PATCH ${B}`]: json({ name: 'Renamed' }),
    [`DELETE ${B}`]: null,
    [`POST ${B}/statuses`]: json({ key: 'other', name: 'Other', color: '#ff9900' }),
    [`POST ${B}/statuses/reorder`]: json({ statusIds: [status.id] }),
    [`PATCH ${B}/statuses/{statusId}`]: json({ name: 'Renamed' }),
    [`DELETE ${B}/statuses/{statusId}`]: null,
    [`PUT ${B}/schema`]: json({ type: 'object' }),
    [`DELETE ${B}/schema`]: null,
    [`POST ${B}/fields/{entityType}`]: json({ key: 'tier', label: 'Tier', type: 'text' }),
    [`POST ${B}/fields/{entityType}/reorder`]: json({ keys: ['plan'] }),
    [`PATCH ${B}/fields/{entityType}/{key}`]: json({ label: 'Renamed' }),
    [`DELETE ${B}/fields/{entityType}/{key}`]: null,
    [`POST ${B}/categories`]: json({ name: 'Other' }),
    [`POST ${B}/categories/reorder`]: json({ categoryIds: [category.id] }),
    [`PATCH ${B}/categories/{categoryId}`]: json({ name: 'Renamed' }),
    [`DELETE ${B}/categories/{categoryId}`]: null,
    [`POST ${B}/tags`]: json({ name: 'other' }),
    [`POST ${B}/tags/merge`]: json({ targetTagId: tag.id, sourceTagIds: [tag2.id] }),
    [`PATCH ${B}/tags/{tagId}`]: json({ name: 'renamed' }),
    [`DELETE ${B}/tags/{tagId}`]: null,
    [`POST ${B}/tags/{targetId}/merge`]: json({ sourceTagIds: [tag2.id] }),
    [`POST ${B}/contacts`]: json({ email: 'new@example.com' }),
    [`PATCH ${B}/contacts/{contactId}`]: json({ name: 'Renamed' }),
    [`DELETE ${B}/contacts/{contactId}`]: null,
    [`POST ${B}/customers`]: json({ email: 'new@example.com' }),
    [`PATCH ${B}/customers/{contactId}`]: json({ name: 'Renamed' }),
    [`DELETE ${B}/customers/{contactId}`]: null,
    [`POST ${B}/contacts/{contactId}/erase`]: json({ confirm: true }),
    'POST /v1/contacts/erase': json({ email: 'nobody@initech.example', confirm: true }),
    [`POST ${B}/companies`]: json({ name: 'Other' }),
    [`PATCH ${B}/companies/{companyId}`]: json({ name: 'Renamed' }),
    [`DELETE ${B}/companies/{companyId}`]: null,
    [`POST ${B}/blocked-sources`]: json({ value: 'other@example.com' }),
    [`DELETE ${B}/blocked-sources/{sourceId}`]: null,
    [`POST ${B}/tickets`]: json({ title: 'New' }),
    [`PATCH ${B}/tickets/{ticketId}`]: json({ title: 'Renamed' }),
    [`DELETE ${B}/tickets/{ticketId}`]: null,
    [`POST ${B}/tickets/{ticketId}/comments`]: json({ body: 'Hello' }),
    [`PATCH ${B}/tickets/{ticketId}/comments/{commentId}`]: json({ body: 'Renamed' }),
    [`DELETE ${B}/tickets/{ticketId}/comments/{commentId}`]: null,
    [`PATCH ${B}/comments/{commentId}`]: json({ body: 'Renamed' }),
    [`DELETE ${B}/comments/{commentId}`]: null,
    [`POST ${B}/tickets/{ticketId}/spam`]: json({ isSpam: true }),
    [`POST ${B}/tickets/{ticketId}/merge`]: json({ sourceTicketIds: [other.id] }),
    [`POST ${B}/tickets/bulk`]: json({ action: 'close', ticketIds: [ticket.id] }),
    [`POST ${B}/tickets/{ticketId}/watchers`]: json({ memberId }),
    [`PATCH ${B}/tickets/{ticketId}/watchers/{memberId}`]: json({ notifyOnComment: false }),
    [`DELETE ${B}/tickets/{ticketId}/watchers/{memberId}`]: null,
    [`POST ${B}/tickets/{ticketId}/attachments`]: json({ filename: 'a.txt', contentType: 'text/plain', size: 3, commentId: comment.id }),
    [`POST ${B}/tickets/{ticketId}/attachments/{attachmentId}/confirm`]: null,
    [`DELETE ${B}/tickets/{ticketId}/attachments/{attachmentId}`]: null,
    [`POST ${B}/tickets/{ticketId}/attachments/upload`]: MULTIPART,
    [`POST ${B}/attachments/pending`]: json({ filename: 'a.txt', contentType: 'text/plain', size: 3 }),
    [`POST ${B}/attachments/pending/{attachmentId}/confirm`]: null,
    [`POST ${B}/attachments/pending/upload`]: MULTIPART,
    [`POST ${B}/attachments/urls`]: json({ ids: [attachment.id] }),
    [`POST ${B}/webhooks`]: json({ url: 'https://93.184.215.14/other', events: ['ticket.updated'] }),
    [`PATCH ${B}/webhooks/{webhookId}`]: json({ enabled: false }),
    [`DELETE ${B}/webhooks/{webhookId}`]: null,
    [`POST ${B}/webhooks/{webhookId}/rotate-secret`]: json({ graceMinutes: 5 }),
    [`POST ${B}/webhooks/{webhookId}/deliveries/{deliveryId}/redeliver`]: null,
    [`POST ${B}/forms`]: json({ name: 'Another form', successUrl: 'https://shop.example/thanks' }),
    [`PATCH ${B}/forms/{formId}`]: json({ enabled: false }),
    [`DELETE ${B}/forms/{formId}`]: null,
    [`POST ${B}/forms/{formId}/regenerate`]: null,
    [`POST ${B}/recurring-tickets`]: json({ title: 'Daily check', schedule: { frequency: 'daily', timeOfDay: '08:00', timezone: 'UTC' } }),
    [`PATCH ${B}/recurring-tickets/{recurringId}`]: json({ title: 'Renamed' }),
    [`DELETE ${B}/recurring-tickets/{recurringId}`]: null,
    [`POST ${B}/recurring-tickets/{recurringId}/pause`]: null,
    [`POST ${B}/recurring-tickets/{recurringId}/resume`]: null,
    [`POST ${B}/recurring-tickets/{recurringId}/run`]: null,
    [`POST ${B}/triggers`]: json({ name: 'Another trigger', on: ['ticket.updated'], conditions: {}, actions: [{ type: 'set_priority', value: 'high' }] }),
    [`PATCH ${B}/triggers/{triggerId}`]: json({ name: 'Renamed' }),
    [`DELETE ${B}/triggers/{triggerId}`]: null,
    [`POST ${B}/triggers/reorder`]: json({ ids: [trigger.id] }),
    [`POST ${B}/triggers/{triggerId}/test`]: json({ ticketId: ticket.id }),
    [`POST ${B}/automations`]: json({
      name: 'Another automation',
      conditions: { all: [{ field: 'hoursSinceCreated', operator: 'gt', value: 1000 }] },
      actions: [{ type: 'set_priority', value: 'low' }],
    }),
    [`PATCH ${B}/automations/{automationId}`]: json({ name: 'Renamed' }),
    [`DELETE ${B}/automations/{automationId}`]: null,
    [`POST ${B}/automations/reorder`]: json({ ids: [automation.id] }),
    [`POST ${B}/macros`]: json({ name: 'Another macro', visibility: 'brand', actions: [{ type: 'add_tags', value: ['macro'] }] }),
    [`PATCH ${B}/macros/{macroId}`]: json({ name: 'Renamed' }),
    [`DELETE ${B}/macros/{macroId}`]: null,
    [`POST ${B}/macros/{macroId}/apply`]: json({ ticketId: ticket.id }),
    [`POST ${B}/macros/{macroId}/preview`]: json({ ticketId: ticket.id }),
    [`POST ${B}/views`]: json({ name: 'Another view', visibility: 'brand', filters: { status: 'open' } }),
    [`PATCH ${B}/views/{viewId}`]: json({ name: 'Renamed' }),
    [`DELETE ${B}/views/{viewId}`]: null,
    [`POST ${B}/ecommerce/orders/{orderId}/link`]: json({ ticketId: ticket.id, linkType: 'MANUAL' }),
    [`DELETE ${B}/ecommerce/orders/{orderId}/link/{ticketId}`]: null,
    [`POST ${B}/domains`]: json({ domain: 'other-mail.example' }),
    [`PATCH ${B}/domains/{domainId}`]: json({ fromName: 'Desk' }),
    [`DELETE ${B}/domains/{domainId}`]: null,
    [`POST ${B}/domains/{domainId}/verify`]: null,
    [`POST ${B}/email-connections`]: json({ provider: 'IMAP', email: 'other@initech.example', host: '93.184.215.14', password: 'pw' }),
    // Always 400 oauth_unavailable for whoever may call it: the sweep still wants its request.
    [`POST ${B}/email-connections/authorize`]: json({ provider: 'GMAIL' }),
    [`PATCH ${B}/email-connections/{connectionId}`]: json({ name: 'Desk' }),
    [`POST ${B}/email-connections/{connectionId}/primary`]: null,
    [`POST ${B}/email-connections/{connectionId}/reconnect`]: null,
    // The world's mailbox is at an address no test reaches: the owner's sync fails within mailboxTimeoutMs, recorded on the connection.
    [`POST ${B}/email-connections/sync`]: null,
    [`POST ${B}/email-connections/{connectionId}/sync`]: null,
    [`POST ${B}/email-connections/{connectionId}/retry`]: null,
    [`DELETE ${B}/email-connections/{connectionId}`]: null,
    // No store answers the world's server (testConfig): connect is refused with 400 store_unreachable at once.
    [`POST ${B}/ecommerce/stores/connect`]: json({ platform: 'BIGCOMMERCE', accessToken: 'world-store-token', storeHash: 'worldstore' }),
    [`POST ${B}/ecommerce/stores/{storeId}/sync`]: null,
    [`DELETE ${B}/ecommerce/stores/{storeId}`]: null,
    // A store's notification: its secret is the credential; the path names a store that is no one's (the sweep gets 401 throughout).
    'POST /v1/ecommerce/notifications/{platform}/{accountId}/{storeId}': {
      body: { scope: 'store/order/updated', data: { type: 'order', id: 1 } },
      headers: { 'x-ticketd-notify-secret': 'world-notify-secret' },
    },
    'POST /v1/forms/{token}': json({ email: 'peter@initech.example', name: 'Peter', subject: 'By form', message: 'Hello' }),
    // Sign-in: the owner's address, from a loopback page (a dashboard origin by default). A link's
    // token works once, so verify's request is one that is well formed.
    'POST /v1/auth/check-email': json({ email: ownerEmail }),
    'POST /v1/auth/signup': { body: { email: 'new-organization@example.com' }, headers: { origin: 'http://localhost:5173' } },
    'POST /v1/auth/magic-link': { body: { email: ownerEmail }, headers: { origin: 'http://localhost:5173' } },
    'POST /v1/auth/verify': json({ token: `ml_${'0'.repeat(43)}` }),
    'POST /v1/auth/logout': null,
    'POST /v1/auth/mentions/{mentionId}/ack': null,
    'POST /v1/auth/mentions/ack-ticket/{ticketId}': null,
    'POST /v1/auth/members/invite': { body: { email: 'another-invitee@example.com', role: 'member', allBrands: true, brandIds: [] }, headers: { origin: 'http://localhost:5173' } },
    'POST /v1/auth/members/{memberId}/resend-invite': null,
    'PATCH /v1/auth/members/{memberId}': json({ role: 'admin' }),
    'DELETE /v1/auth/members/{memberId}': null,
    'PUT /v1/auth/members/{memberId}/brands': json({ allBrands: true, brandIds: [] }),
    // To the owner themselves: a transfer that succeeds and changes nothing. The invitation is someone else's: well formed, like verify's token.
    'POST /v1/auth/transfer-ownership': json({ newOwnerId: memberId }),
    'POST /v1/auth/accept-invite': json({ inviteId: invitee }),
    'POST /v1/auth/feature-requests': json({ title: 'Another idea', featureDetails: 'Details' }),
    'PATCH /v1/auth/feature-requests/{id}': json({ status: 'planned' }),
    'POST /v1/auth/feature-requests/{id}/vote': null,
    'DELETE /v1/auth/feature-requests/{id}/vote': null,
    'PUT /v1/uploads/{token}': { body: 'abc', headers: { 'content-type': 'application/octet-stream' } },
    // The customer portal: minted for the main ticket's customer; the rest is that customer's.
    [`POST ${B}/portal/token`]: json({ email: 'peter@initech.example', expiresIn: '1h' }),
    [`POST ${B}/portal/magic-link`]: json({ email: 'peter@initech.example', portalUrl: `${portalOrigin}/help` }),
    'POST /v1/portal/verify': json({ token: `pl_${'0'.repeat(43)}` }),
    'POST /v1/portal/refresh': null,
    'POST /v1/portal/tickets': json({ title: 'From the portal', body: 'Help' }),
    'POST /v1/portal/tickets/{ticketId}/comments': json({ body: 'Thanks' }),
    'POST /v1/portal/tickets/attachments/pending': json({ filename: 'a.txt', contentType: 'text/plain', size: 3 }),
    'POST /v1/portal/tickets/attachments/pending/{attachmentId}/confirm': null,
    'POST /v1/portal/tickets/{ticketId}/attachments': json({ filename: 'a.txt', contentType: 'text/plain', size: 3 }),
    'POST /v1/portal/tickets/{ticketId}/attachments/{attachmentId}/confirm': null,
    'POST /v1/portal/tickets/{ticketId}/feedback': json({ rating: 1, comment: 'Quick and kind' }),
    'POST /v1/feedback/{token}': json({ rating: 1 }),
    // Billing, on the default configuration's one plan; the checkout page's token is its credential.
    'POST /v1/auth/subscription/upgrade': json({ planId: 'self-hosted', successUrl: 'http://localhost:5173/billing?upgraded=true', cancelUrl: 'http://localhost:5173/billing' }),
    'POST /v1/auth/subscription/confirm': json({ planRef: 'self-hosted' }),
    'POST /v1/auth/subscription/cancel': json({}),
    'POST /v1/auth/subscription/reactivate': null,
    'POST /v1/auth/subscription/cancel-pending-change': null,
    'POST /v1/auth/payment-methods/add': null,
    'POST /v1/auth/payment-methods/{id}/default': null,
    'DELETE /v1/auth/payment-methods/{id}': null,
    'POST /billing/checkout/{token}': null,
    // A paid sign-up: the world's one plan is free, so it is refused (400 free_plan) before a checkout is made.
    'POST /v1/auth/checkout': {
      body: { email: 'paid-organization@example.com', planId: 'self-hosted', successUrl: 'http://localhost:5173/welcome', cancelUrl: 'http://localhost:5173/pricing' },
      headers: { origin: 'http://localhost:5173' },
    },
    'POST /billing/signup/{token}': null,
    // The world's server bills locally: Stripe's notifications are 404.
    'POST /v1/billing/stripe-webhooks': {
      body: '{"id":"evt_world","object":"event","type":"invoice.paid"}',
      headers: { 'content-type': 'application/json', 'stripe-signature': 't=1,v1=00' },
    },
    // The world's server configures no identity provider: every notification is 404.
    'POST /v1/webhooks/{provider}': json({ type: 'user.updated', data: { id: 'user_world' } }),
    // Coupons: for an instance administrator of an installation that configures this code (the owner here is neither: 403).
    'PATCH /v1/auth/coupons/{code}': json({ maxRedemptions: 10 }),
    'POST /rate/{token}': { body: 'rating=1', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
    'PATCH /v1/auth/profile': json({ displayName: 'Owner', notifyToast: false }),
    'POST /v1/auth/profile/avatar/upload': AVATAR_MULTIPART,
    'POST /v1/auth/profile/avatar': json({ filename: 'me.gif', contentType: 'image/gif', size: AVATAR_GIF.length }),
    'POST /v1/auth/profile/avatar/confirm': null,
    'DELETE /v1/auth/profile/avatar': null,
    'PUT /v1/avatars/{accountId}/{avatarId}': { body: AVATAR_GIF, headers: { 'content-type': 'application/octet-stream' } },
    'PATCH /v1/auth/organization': json({ name: 'Renamed organization' }),
    // Single sign-on: the world's server allows no private addresses, so this loopback issuer is refused (400) without a request.
    'PUT /v1/auth/organization/sso': json({ issuer: 'https://127.0.0.1:9', clientId: 'world', clientSecret: 'world-secret', allowedDomains: ['sso.initech.example'] }),
    'DELETE /v1/auth/organization/sso': null,
    'POST /v1/auth/sso/start': { body: { email: ownerEmail }, headers: { origin: 'http://localhost:5173' } },
    'POST /v1/auth/switch-organization': json({ organizationId: owner.accountId }),
    'POST /v1/auth/connect': json({ apiKey: owner.liveKey }),
    'DELETE /v1/auth/account': { body: { confirmation: 'DELETE' }, headers: { authorization: `Bearer ${doomedSession}` } },
    'POST /v1/inbound/email': {
      body: `From: Peter <peter@initech.example>\r\nTo: ${owner.brand.id}@${INBOUND_DOMAIN}\r\nSubject: ${MARKER} by mail\r\nMessage-ID: <world@initech.example>\r\n\r\nHello\r\n`,
      headers: { 'content-type': 'message/rfc822', authorization: `Bearer ${INBOUND_SECRET}` },
    },
  };

  return {
    app,
    owner,
    sideBrand,
    scoped: client(app, scopedKey.key),
    scopedKeyId: scopedKey.id,
    testBrand,
    stranger,
    params: {
      brandId: owner.brand.id,
      ticketId: ticket.id,
      commentId: comment.id,
      statusId: status.id,
      categoryId: category.id,
      tagId: tag.id,
      targetId: tag.id,
      contactId: contact.id,
      companyId: company.id,
      sourceId: blocked.id,
      memberId,
      attachmentId: attachment.id,
      entityType: 'ticket',
      key: 'plan',
      webhookId: webhook.id,
      deliveryId: delivery.id,
      keyId: targetKey.id,
      token: tokenOf(download.downloadUrl),
      mentionId: mention.id,
      id: featureRequest.id,
      // An avatar's id is the credential of its public URL: the sweep and the fuzz get a well-formed id that is no avatar.
      accountId: owner.accountId,
      avatarId: `av_${'0'.repeat(43)}`,
      formId: form.id,
      recurringId: recurring.id,
      triggerId: trigger.id,
      automationId: automation.id,
      macroId: macro.id,
      viewId: view.id,
      domainId: mailDomain.id,
      connectionId: mailbox.id,
      storeId: commerceStoreId,
      platform: 'bigcommerce',
      provider: 'clerk',
      rawMailId: rawMail.id,
      orderId: order.id,
    },
    paramsByRoute: {
      'PUT /v1/uploads/{token}': { token: tokenOf(grant.uploadUrl) },
      // A form's token is the credential of its public URL: a well-formed token that is no form's (the fuzz posts to the real one, formToken).
      'POST /v1/forms/{token}': { token: `ft_${'0'.repeat(43)}` },
      // A rating link's token is its credential: a well-formed token that is no rating request's.
      ...Object.fromEntries(
        ['GET /v1/feedback/{token}', 'POST /v1/feedback/{token}', 'GET /rate/{token}', 'POST /rate/{token}'].map((route) => [route, { token: `fb_${'0'.repeat(43)}` }]),
      ),
      ...Object.fromEntries(['GET /billing/checkout/{token}', 'POST /billing/checkout/{token}'].map((route) => [route, { token: `cs_${'0'.repeat(43)}` }])),
      ...Object.fromEntries(['GET /billing/signup/{token}', 'POST /billing/signup/{token}'].map((route) => [route, { token: `su_${'0'.repeat(43)}` }])),
      'PATCH /v1/auth/coupons/{code}': { code: 'WELCOME10' },
      [`POST ${B}/contacts/{contactId}/erase`]: { contactId: erasable.id },
      'POST /v1/ecommerce/notifications/{platform}/{accountId}/{storeId}': { storeId: `store_${'0'.repeat(26)}` },
      // The rating routes of the portal aim at Peter's resolved ticket.
      ...Object.fromEntries(['GET /v1/portal/tickets/{ticketId}/feedback', 'POST /v1/portal/tickets/{ticketId}/feedback'].map((route) => [route, { ticketId: resolved.id }])),
      ...Object.fromEntries(TEAM_ROUTES_ON_INVITEE.map((route) => [route, { memberId: invitee }])),
      ...Object.fromEntries(
        ['GET', 'HEAD']
          .flatMap((method) => [`${method} ${B}/tickets/{ticketId}/raw-mails`, `${method} ${B}/tickets/{ticketId}/raw-mails/{rawMailId}`])
          .map((route) => [route, { ticketId: mailedTicketId }]),
      ),
    },
    requests,
    queries: {
      [`GET ${B}/contacts/search`]: '?q=pe',
      [`GET ${B}/customers/search`]: '?q=pe',
      'GET /v1/contacts/export': '?email=peter@initech.example',
      [`GET ${B}/tickets/export`]: '?comments=true',
    },
    privateIds: [
      owner.brand.id,
      company.id,
      contact.id,
      erasable.id,
      category.id,
      tag.id,
      tag2.id,
      status.id,
      blocked.id,
      ticket.id,
      other.id,
      resolved.id,
      comment.id,
      attachment.id,
      grant.id,
      webhook.id,
      delivery.id,
      form.id,
      form.token,
      recurring.id,
      trigger.id,
      automation.id,
      macro.id,
      view.id,
      mailDomain.id,
      mailbox.id,
      commerceStoreId,
      mention.id,
      mailedTicketId,
      rawMail.id,
      order.id,
      ...ownKeys.filter((k) => k.allBrands).map((k) => k.id),
    ],
    accountWideIds: [featureRequest.id, invitee],
    accountWideRoutes: [
      'PATCH /v1/auth/feature-requests/{id}',
      'POST /v1/auth/feature-requests/{id}/vote',
      'DELETE /v1/auth/feature-requests/{id}/vote',
      'GET /v1/auth/members/{memberId}/brands',
      'HEAD /v1/auth/members/{memberId}/brands',
    ],
    revokedKey: revoked.key,
    formToken: form.token,
    portalToken,
    portalOrigin,
    ticketId: ticket.id,
    otherTicketId: other.id,
    commentId: comment.id,
    attachmentId: attachment.id,
    tagIds: [tag.id, tag2.id],
  };
}
