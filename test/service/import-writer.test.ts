import t from 'tap';
import { systemCtx, tenantCtx, type TenantCtx } from '../../server/core/context.js';
import { createAccount } from '../../server/flows/accounts.js';
import { createBrand } from '../../server/flows/brands.js';
import { createCompany } from '../../server/flows/customers.js';
import { createTicket } from '../../server/flows/ticket-create.js';
import { createComment } from '../../server/flows/comment-create.js';
import { importCtx, writeTicket, type ImportedComment, type ImportedTicket } from '../../server/flows/import-writer.js';
import * as categories from '../../server/domains/categories/service.js';
import * as tags from '../../server/domains/tags/service.js';
import * as tickets from '../../server/domains/tickets/service.js';
import * as webhooks from '../../server/domains/webhooks/service.js';
import { findOrCreateContact } from '../../server/flows/customers.js';
import { servicesOf } from '../helpers/app.js';
import { freshDatabase } from '../helpers/db.js';

// The import writer's ticket rows against ticket create's: every derived column (sort keys, search,
// resolution, counts, tag copies) as the usual write makes it, with the source's times and number.

const { db } = await freshDatabase(t);

async function setup() {
  const created = await createAccount(systemCtx(servicesOf(db)), { email: `imp-${Math.random().toString(36).slice(2)}@example.com`, name: 'Ada Agent' });
  const ctx: TenantCtx = { ...tenantCtx(systemCtx(servicesOf(db)), created.account.id, true), actor: { type: 'api', id: 'key_test', name: 'CI key' } };
  const brand = await createBrand(ctx, { name: 'Imports' });
  await createCompany(ctx, brand.id, { name: 'Globex', domain: 'globex.example' });
  const category = await categories.create(ctx, brand.id, { name: 'Billing' });
  const tag = await tags.create(ctx, brand.id, { name: 'vip' });
  const customer = await findOrCreateContact(ctx, brand.id, 'jane@globex.example', 'Jane Roe');
  return { ctx, brandId: brand.id, ownerId: created.owner.id, categoryId: category.id, tagId: tag.id, customerId: customer.id };
}

const DERIVED = `customer_id, customer_sort, customer_text, company_sort, assignee_sort, category_sort, search_vector::text as search, is_spam,
  resolved_at is not null as resolved, status_changed_at is not null as status_changed, comment_count, attachment_count`;
const derived = async (id: string) => (await db.raw(`select ${DERIVED} from tickets where id = ?`, [id])).rows[0];
const tagCopies = async (id: string) => (await db.raw('select status, priority from ticket_tags where ticket_id = ?', [id])).rows;

function imported(s: Awaited<ReturnType<typeof setup>>, over: Partial<ImportedTicket> = {}): ImportedTicket {
  return {
    brandId: s.brandId,
    ticketNumber: null,
    keepNumber: false,
    title: 'Invoice is wrong',
    body: 'The March invoice counts twice.',
    status: 'resolved',
    priority: 'high',
    assigneeId: s.ownerId,
    createdBy: null,
    customerId: s.customerId,
    categoryId: s.categoryId,
    tagIds: [s.tagId],
    links: [],
    customFields: null,
    metadata: {},
    source: 'api',
    sourceId: null,
    sourceData: null,
    isSpam: false,
    legalHold: false,
    closeReason: null,
    dueAt: null,
    createdAt: '2025-03-01T10:00:00.000Z',
    updatedAt: '2025-03-02T11:00:00.000Z',
    ...over,
  };
}

const comment = (ref: string, over: Partial<ImportedComment> = {}): ImportedComment => ({
  ref,
  version: '2025-03-01T12:00:00.000Z',
  parentRef: null,
  body: `comment ${ref}`,
  authorId: null,
  authorName: null,
  authorType: 'AGENT',
  isInternal: false,
  links: [],
  metadata: {},
  source: 'api',
  sourceId: null,
  sourceData: null,
  cc: [],
  createdAt: '2025-03-01T12:00:00.000Z',
  updatedAt: '2025-03-01T12:00:00.000Z',
  ...over,
});

t.test("an imported ticket's derived columns are those ticket create writes; its times are the source's", async (t) => {
  const s = await setup();
  const usual = (
    await createTicket(s.ctx, s.brandId, {
      title: 'Invoice is wrong',
      body: 'The March invoice counts twice.',
      customerEmail: 'jane@globex.example',
      assigneeId: s.ownerId,
      categoryId: s.categoryId,
      tags: [s.tagId],
      status: 'resolved',
      priority: 'high',
    })
  ).ticket;
  const written = await writeTicket(importCtx(s.ctx), 'test:source', { sourceId: 'T1', version: 'v1' }, undefined, imported(s), [], []);
  t.same(await derived(written.ticketId), await derived(usual.id), 'sort keys, search vector, customer, resolution: alike');
  t.same(await tagCopies(written.ticketId), await tagCopies(usual.id), "the tag link carries the ticket's status and priority");

  const view = await tickets.get(s.ctx, s.brandId, written.ticketId);
  t.match(view, {
    createdAt: '2025-03-01T10:00:00.000Z',
    updatedAt: '2025-03-02T11:00:00.000Z',
    status: 'resolved',
    customer: { email: 'jane@globex.example', company: { name: 'Globex' } },
  });
  const found = await tickets.list(s.ctx, s.brandId, { search: 'march invoice', status: 'all' } as never);
  t.equal(found.data.length, 2, 'found by search as the usual one is');

  const counted = (
    await db.raw(`select day::text, sum(created)::int as created, sum(resolved)::int as resolved from ticket_count_changes where brand_id = ? group by day order by day`, [
      s.brandId,
    ])
  ).rows;
  t.match(counted[0], { day: '2025-03-01', created: 1 }, 'counted on the day the source created it');
  t.ok(
    counted.some((r: { day: string; resolved: number }) => r.day === '2025-03-02' && r.resolved === 1),
    'resolved on its last update',
  );
});

t.test("a ticket held in the source is held in the target, created or updated: the target's retention never removes it", async (t) => {
  const s = await setup();
  const ctx = importCtx(s.ctx);
  const held = async (id: string) => (await db.raw('select legal_hold from tickets where id = ?', [id])).rows[0].legal_hold;
  const created = await writeTicket(ctx, 'test:source', { sourceId: 'H1', version: 'v1' }, undefined, imported(s, { legalHold: true }), [], []);
  t.equal(await held(created.ticketId), true, 'created held');
  const lifted = await writeTicket(ctx, 'test:source', { sourceId: 'H1', version: 'v2' }, { targetId: created.ticketId, version: 'v1' }, imported(s, { legalHold: false }), [], []);
  t.equal(await held(lifted.ticketId), false, 'and lifted when the source lifts it');
});

t.test('numbers: the source one when asked and free, else the next; the counter moves past kept ones', async (t) => {
  const s = await setup();
  const ctx = importCtx(s.ctx);
  const kept = await writeTicket(ctx, 'test:source', { sourceId: 'N1', version: 'v1' }, undefined, imported(s, { ticketNumber: 2000, keepNumber: true }), [], []);
  t.equal(kept.ticketNumber, 2000);
  const taken = await writeTicket(ctx, 'test:source', { sourceId: 'N2', version: 'v1' }, undefined, imported(s, { ticketNumber: 2000, keepNumber: true }), [], []);
  t.equal(taken.ticketNumber, 2001, 'taken: the next one');
  const next = (await createTicket(s.ctx, s.brandId, { title: 'After the import' })).ticket;
  t.equal(next.ticketNumber, 2002, 'a new ticket follows');
  const renumbered = await writeTicket(ctx, 'test:source', { sourceId: 'N3', version: 'v1' }, undefined, imported(s, { ticketNumber: 7 }), [], []);
  t.equal(renumbered.ticketNumber, 2003, 'without keepNumber: the next one');
  const low = await writeTicket(ctx, 'test:source', { sourceId: 'N4', version: 'v1' }, undefined, imported(s, { ticketNumber: 12, keepNumber: true }), [], []);
  t.equal(low.ticketNumber, 12, 'a free number below the counter is kept too');
  t.equal((await createTicket(s.ctx, s.brandId, { title: 'Later' })).ticket.ticketNumber, 2004, 'and the counter stays');
});

t.test("comments keep their times, authors and flags; the ticket's counts and moments follow; a second write changes only what changed", async (t) => {
  const s = await setup();
  const ctx = importCtx(s.ctx);
  const comments = [
    comment('C1', { authorType: 'CUSTOMER', authorName: 'Jane Roe', createdAt: '2025-03-01T11:00:00.000Z' }),
    comment('C2', { authorType: 'AGENT', authorId: s.ownerId, createdAt: '2025-03-01T12:00:00.000Z', parentRef: 'C1' }),
    comment('C3', { isInternal: true, metadata: { isInternal: true }, createdAt: '2025-03-01T13:00:00.000Z' }),
  ];
  const first = await writeTicket(ctx, 'test:source', { sourceId: 'T', version: 'v1' }, undefined, imported(s, { status: 'open' }), comments, []);
  t.same(first.comments, { created: 3, updated: 0, unchanged: 0 });
  const row = (await db.raw('select comment_count, last_customer_message_at, last_agent_reply_at from tickets where id = ?', [first.ticketId])).rows[0];
  t.equal(row.comment_count, 3);
  t.equal(row.last_customer_message_at.toISOString(), '2025-03-01T11:00:00.000Z');
  t.equal(row.last_agent_reply_at.toISOString(), '2025-03-01T12:00:00.000Z', 'the internal note is no reply');
  const listed = (await db.raw('select parent_id is not null as reply, author_type, is_internal, created_at from comments where ticket_id = ? order by id', [first.ticketId])).rows;
  t.same(
    listed.map((c: { reply: boolean; author_type: string; is_internal: boolean; created_at: Date }) => [c.reply, c.author_type, c.is_internal, c.created_at.toISOString()]),
    [
      [false, 'CUSTOMER', false, '2025-03-01T11:00:00.000Z'],
      [true, 'AGENT', false, '2025-03-01T12:00:00.000Z'],
      [false, 'AGENT', true, '2025-03-01T13:00:00.000Z'],
    ],
  );

  const known = { targetId: first.ticketId, version: 'v1' };
  const changed = [comments[0]!, { ...comments[1]!, body: 'edited', version: 'v2' }, comments[2]!, comment('C4', { createdAt: '2025-03-01T14:00:00.000Z' })];
  const again = await writeTicket(ctx, 'test:source', { sourceId: 'T', version: 'v2' }, known, imported(s, { status: 'pending', title: 'Invoice is still wrong' }), changed, []);
  t.same(again.comments, { created: 1, updated: 1, unchanged: 2 });
  t.equal(again.ticketId, first.ticketId, 'the same ticket, updated');
  const view = await tickets.get(s.ctx, s.brandId, first.ticketId);
  t.match(view, { title: 'Invoice is still wrong', status: 'pending', commentCount: 4, updatedAt: '2025-03-02T11:00:00.000Z' });
  t.same(await tagCopies(first.ticketId), [{ status: 'pending', priority: 'high' }], 'the tag copy follows the update');
});

t.test('imported writes are audited as import and queue nothing, while the usual writes do', async (t) => {
  const s = await setup();
  await webhooks.create(s.ctx, { allowPrivate: true }, s.brandId, { url: 'http://127.0.0.1:9/hook', events: ['ticket.created', 'comment.created'] });
  const written = await writeTicket(importCtx(s.ctx), 'test:source', { sourceId: 'Q', version: 'v1' }, undefined, imported(s), [comment('Q1')], []);
  const queued = async () => Number((await db.raw('select count(*) as n from outbox where brand_id = ?', [s.brandId])).rows[0].n);
  t.equal(await queued(), 0, 'nothing queued for the import');
  const sources = (await db.raw('select distinct source from audit_log where ticket_id = ?', [written.ticketId])).rows.map((r: { source: string }) => r.source);
  t.same(sources, ['import']);
  await createComment(s.ctx, s.brandId, written.ticketId, { body: 'A usual reply' });
  t.ok((await queued()) > 0, 'a usual comment on the imported ticket is announced to the same webhook');
});
