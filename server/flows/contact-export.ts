import type { TenantCtx } from '../core/context.js';
import { requireBrand } from '../core/brand.js';
import { notFound } from '../core/errors.js';
import { columnsToProperties, tenantScope } from '../core/model.js';
import { normalizeEmail } from '../core/text.js';
import * as attachments from '../domains/attachments/service.js';
import * as contacts from '../domains/contacts/service.js';

/**
 * A data subject's export (decision 0120): one JSON document of everything held about a person,
 * written as it is read, a page of tickets at a time (with their comments, attachments and their
 * download links, raw mail metadata and audit entries), so a person with thousands of tickets
 * never sits in memory whole. Form submissions are tickets (source `web`, sourceData.formId). Portal
 * tokens are listed without their hashes. The contacts are found before the first byte, so an
 * unknown one is a 404 like any other.
 */

const TICKET_PAGE = 100;

export interface ExportTarget {
  brandId: string;
  contactId: string;
}

/** The brand's contact, or 404. */
export async function contactTarget(ctx: TenantCtx, brandId: string, contactId: string): Promise<ExportTarget[]> {
  const brand = await requireBrand(ctx, brandId);
  const found = (await ctx.db.raw(`select c.id from contacts c where ? and c.brand_id = ? and c.id = ?`, [tenantScope(ctx, 'c'), brand.id, contactId])) as { rows: unknown[] };
  if (!found.rows.length) throw notFound('Contact');
  return [{ brandId: brand.id, contactId }];
}

/** The contacts with this email in every brand of the account (none: an empty document). */
export async function emailTargets(ctx: TenantCtx, email: string): Promise<ExportTarget[]> {
  const r = (await ctx.db.raw(`select c.brand_id as "brandId", c.id as "contactId" from contacts c where ? and c.email = ? order by c.brand_id, c.id`, [
    tenantScope(ctx, 'c'),
    normalizeEmail(email),
  ])) as { rows: ExportTarget[] };
  return r.rows;
}

type Row = Record<string, unknown>;

async function rows(ctx: TenantCtx, sql: string, bindings: unknown[]): Promise<Row[]> {
  const r = (await ctx.db.raw(sql, bindings as never[])) as { rows: Row[] };
  return r.rows.map((row) => columnsToProperties(row) as Row);
}

const byKey = (list: readonly Row[], key: string) => {
  const map = new Map<string, Row[]>();
  for (const row of list) {
    const k = row[key] as string;
    map.set(k, [...(map.get(k) ?? []), row]);
  }
  return map;
};

const TICKET_COLUMNS = `t.id, t.ticket_number, t.title, t.body, t.status, t.priority, t.source, t.custom_fields, t.metadata, t.links, t.source_data,
  t.created_at, t.updated_at, t.resolved_at, t.deleted_at, t.close_reason`;

/** The tickets of one page and what hangs on them, as JSON text of ticket objects joined by commas. */
async function ticketPage(ctx: TenantCtx, io: attachments.AttachmentIo, target: ExportTarget, tickets: Row[]): Promise<string> {
  const ids = tickets.map((t) => t.id as string);
  const scoped = (alias: string) => [tenantScope(ctx, alias), target.brandId, ids];
  const comments = await rows(
    ctx,
    `select c.id, c.ticket_id, c.body, c.author_type, c.author_id, c.author_name, c.is_internal, c.source, c.cc, c.source_data, c.created_at, c.updated_at, c.deleted_at
     from comments c where ? and c.brand_id = ? and c.ticket_id = any(?::text[]) order by c.id`,
    scoped('c'),
  );
  const files = await rows(
    ctx,
    `select a.id, a.ticket_id, a.comment_id, a.filename, a.content_type, a.size, a.status, a.created_at
     from attachments a where ? and a.brand_id = ? and a.ticket_id = any(?::text[]) order by a.id`,
    scoped('a'),
  );
  const links = files.length
    ? await attachments.urls(
        ctx,
        io,
        target.brandId,
        files.map((f) => f.id as string),
      )
    : {};
  const raw = await rows(
    ctx,
    `select r.id, r.ticket_id, r.comment_id, r.message_id, r.size, r.sha256, r.created_at from raw_mails r where ? and r.brand_id = ? and r.ticket_id = any(?::text[]) order by r.id`,
    scoped('r'),
  );
  const history = await rows(
    ctx,
    `select a.id, a.ticket_id, a.entity_type, a.entity_id, a.event, a.performer_type, a.performer_id, a.performer_name, a.source, a.changes, a.metadata, a.created_at
     from audit_log a where ? and a.brand_id = ? and a.ticket_id = any(?::text[]) order by a.id`,
    scoped('a'),
  );
  const commentsOf = byKey(comments, 'ticketId');
  const filesOf = byKey(
    files.map((f) => ({ ...f, size: Number(f.size), downloadUrl: links[f.id as string]?.url ?? null })),
    'ticketId',
  );
  const rawOf = byKey(
    raw.map((r) => ({ ...r, size: Number(r.size) })),
    'ticketId',
  );
  const historyOf = byKey(history, 'ticketId');
  return tickets
    .map((t) =>
      JSON.stringify({
        ...t,
        comments: commentsOf.get(t.id as string) ?? [],
        attachments: filesOf.get(t.id as string) ?? [],
        rawMails: rawOf.get(t.id as string) ?? [],
        auditEntries: historyOf.get(t.id as string) ?? [],
      }),
    )
    .join(',');
}

/** One contact's part of the document: the contact, what is held beside its tickets, then its tickets a page at a time. */
async function* contactPart(ctx: TenantCtx, io: attachments.AttachmentIo, target: ExportTarget): AsyncGenerator<string> {
  const contact = await contacts.get(ctx, target.brandId, target.contactId);
  const one = [tenantScope(ctx, 'x'), target.brandId, target.contactId];
  const portalTokens = await rows(
    ctx,
    `select x.id, x.lifetime_seconds, x.created_at, x.expires_at, x.revoked_at from portal_tokens x where ? and x.brand_id = ? and x.contact_id = ? order by x.id`,
    one,
  );
  const ratings = await rows(
    ctx,
    `select x.id, x.ticket_id, x.rating_type, x.status, x.rating, x.comment, x.sent_at, x.submitted_at, x.created_at
     from ticket_feedback x where ? and x.brand_id = ? and x.contact_id = ? order by x.id`,
    one,
  );
  const inbound = await rows(
    ctx,
    `select x.id, x.message_id, x.from_email, x.action, x.reason, x.ticket_id, x.comment_id, x.authentication, x.created_at
     from inbound_emails x where ? and x.brand_id = ? and lower(x.from_email) = lower(?) order by x.id`,
    [tenantScope(ctx, 'x'), target.brandId, contact.email],
  );
  const about = await rows(
    ctx,
    `select x.id, x.entity_type, x.entity_id, x.event, x.performer_type, x.performer_id, x.performer_name, x.source, x.changes, x.metadata, x.created_at
     from audit_log x where ? and x.brand_id = ? and x.ticket_id is null and (x.entity_id = ? or x.performer_id = ?) order by x.id`,
    [tenantScope(ctx, 'x'), target.brandId, target.contactId, target.contactId],
  );
  const head = { contact, portalTokens, ratings, inboundEmails: inbound, auditEntries: about };
  yield `${JSON.stringify(head).slice(0, -1)},"tickets":[`;
  let after = '';
  let first = true;
  for (;;) {
    const page = await rows(ctx, `select ${TICKET_COLUMNS} from tickets t where ? and t.brand_id = ? and t.customer_id = ? and t.id > ? order by t.id limit ?`, [
      tenantScope(ctx, 't'),
      target.brandId,
      target.contactId,
      after,
      TICKET_PAGE,
    ]);
    if (!page.length) break;
    yield `${first ? '' : ','}${await ticketPage(ctx, io, target, page)}`;
    first = false;
    after = page[page.length - 1]!.id as string;
    if (page.length < TICKET_PAGE) break;
  }
  yield ']}';
}

/** The whole document, as chunks of its text. */
export async function* exportDocument(ctx: TenantCtx, io: attachments.AttachmentIo, targets: readonly ExportTarget[]): AsyncGenerator<string> {
  yield `{"exportedAt":${JSON.stringify(new Date(ctx.services.now()).toISOString())},"contacts":[`;
  for (const [i, target] of targets.entries()) {
    if (i) yield ',';
    yield* contactPart(ctx, io, target);
  }
  yield ']}\n';
}
