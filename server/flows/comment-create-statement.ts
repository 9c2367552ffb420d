import type { Knex } from 'knex';
import type { TenantCtx } from '../core/context.js';
import { canSeeBrand } from '../core/context.js';
import { Brand } from '../core/brand.js';
import * as audit from '../core/audit.js';
import { onCitus, runInAccount } from '../core/citus.js';
import type { SqlFragment } from '../core/db.js';
import type { MailMessage } from '../core/ports.js';
import { claimRowsStatement, requestFingerprint } from '../core/idempotency.js';
import { newId, ID_PREFIX, normalizeBrandId } from '../core/ids.js';
import { accountScope, columnsToProperties, sameAccount, sameTenant, tenantScope } from '../core/model.js';
import * as events from '../core/outbox/events.js';
import { eventsInsert, outboxAdded, wakeDispatchersJoin } from '../core/outbox/service.js';
import { ticketUpdateParts } from '../core/ticket-writes.js';
import type { CreateCommentInput } from '../domains/comments/schemas.js';
import * as comments from '../domains/comments/service.js';
import { Comment } from '../domains/comments/model.js';
import * as mail from '../domains/mail/service.js';
import { AGENT_REPLY } from '../domains/mail/service.js';
import type { SendingDomain } from '../domains/mail/messages.js';
import * as mentions from '../domains/mentions/service.js';
import * as rules from '../domains/rules/service.js';
import { clockMoveOf } from '../domains/tickets/service-level.js';
import { commentMessages, customerOf, mentionedMemberIds, recipientsOf, type Notified } from './comment-mail.js';

/**
 * A comment in two statements and no transaction (decision 0104): one reads what the comment
 * needs (the ticket and its clock, the brand and its sending domain, the watchers and members it
 * tells with their mail preference, the thread's Message-IDs), the other writes it all (the
 * ticket with its status, clock and counters, the comment, the audit entries, the mentions, the
 * mail and the webhook deliveries; a single statement commits as a whole). The write holds only
 * while what was read holds: the ticket's version (versionSql), the brand's settings and rules
 * revisions, the parent comment and the status named. Otherwise it writes nothing and the
 * comment is read and written again (a concurrent reply: at most a few times), then goes step
 * by step (createComment's transaction), which also answers every error.
 *
 * With an idempotency key, the write claims it too (made only with the comment, the comment only
 * when the key was claimed); a key held already (a replay, a request with the same key at the
 * same time, or another request's) writes nothing, and step by step answers it.
 *
 * Not taken (step by step): inside a caller's transaction, and for a brand with comment.created
 * triggers (they run on the ticket after the write).
 */

/** How often a write that found the ticket changed is tried again before going step by step. */
const ATTEMPTS = 3;

/** What the read and the write compare: every column the write's values were computed from. */
const versionSql = (t: string) =>
  `md5(concat_ws('|', ${t}.status, ${t}.priority, (extract(epoch from ${t}.due_at) * 1000000)::bigint, ${t}.due_at_manual,
    (extract(epoch from ${t}.sla_paused_at) * 1000000)::bigint, ${t}.sla_paused_seconds, ${t}.customer_id, ${t}.is_spam, ${t}.title, ${t}.source))`;

interface Seen {
  brand: Brand | null;
  ticket: {
    id: string;
    ticketNumber: number;
    title: string;
    status: string;
    priority: string | null;
    createdAt: Date;
    dueAt: Date | null;
    dueAtManual: boolean;
    slaPausedAt: Date | null;
    slaPausedSeconds: number;
    isSpam: boolean;
    source: string | null;
    sourceData: Record<string, unknown> | null;
    customer: { name: string | null; email: string | null } | null;
    version: string;
  } | null;
  sendingDomain: SendingDomain | null;
  notified: (Notified & { optedOut: boolean })[];
  mentioned: { id: string; name: string | null; email: string; optedOut: boolean }[];
  inboundIds: string[];
  statusOk: boolean;
  parentOk: boolean;
}

const dateOf = (v: unknown) => (v === null || v === undefined ? null : new Date(v as string));

/** The first statement: everything the write is computed from. */
async function read(ctx: TenantCtx, brandId: string, ticketId: string, named: readonly string[], parentId: string | null, setStatus: string | null): Promise<Seen> {
  const [row] = await runInAccount<Record<string, unknown>>(
    ctx,
    ctx.db.raw(
      `select
      (select to_jsonb(br) from brands br where :brScope and br.id = :brandId) as brand,
      (select jsonb_build_object('id', d.id, 'domain', d.domain, 'fromName', d.from_name, 'fromEmail', d.from_email, 'replyMode', d.reply_mode)
        from brand_domains d where :dScope and d.brand_id = :brandId and d.type = 'OUTBOUND' and d.is_primary and d.verified limit 1) as sending_domain,
      (select jsonb_build_object('id', t.id, 'ticketNumber', t.ticket_number, 'title', t.title, 'status', t.status, 'priority', t.priority,
          'createdAt', t.created_at, 'dueAt', t.due_at, 'dueAtManual', t.due_at_manual, 'slaPausedAt', t.sla_paused_at, 'slaPausedSeconds', t.sla_paused_seconds,
          'isSpam', t.is_spam, 'source', t.source, 'sourceData', t.source_data, 'version', ${versionSql('t')},
          'customer', (select jsonb_build_object('name', c.name, 'email', c.email) from contacts c where :cScope and ${sameTenant('c', 't')} and c.brand_id = t.brand_id and c.id = t.customer_id))
        from tickets t where :tScope and t.brand_id = :brandId and t.id = :ticketId and t.deleted_at is null) as ticket,
      (select coalesce(jsonb_agg(jsonb_build_object('memberId', w.member_id, 'memberName', w.member_name, 'memberEmail', w.member_email,
          'optedOut', exists (select 1 from member_profiles p where :pScope and ${sameAccount('p', 'w')} and p.member_id = w.member_id and not p.notify_email)) order by w.id), '[]')
        from ticket_watchers w where :wScope and w.brand_id = :brandId and w.ticket_id = :ticketId and w.notify_on_comment) as notified,
      (select coalesce(jsonb_agg(jsonb_build_object('id', m.id, 'name', m.name, 'email', m.email,
          'optedOut', exists (select 1 from member_profiles p where :pScope and ${sameAccount('p', 'm')} and p.member_id = m.id and not p.notify_email)) order by array_position(:named::text[], m.id)), '[]')
        from members m where :mScope and m.id = any(:named::text[]) and m.status = 'active') as mentioned,
      array(select i.message_id from inbound_emails i where :iScope and i.brand_id = :brandId and i.ticket_id = :ticketId
        and (i.reason is null or i.reason <> :agentReply) order by i.id) as inbound_ids,
      (:setStatus::text is null or exists (select 1 from statuses s where :sScope and s.brand_id = :brandId and s.key = :setStatus::text)) as status_ok,
      (:parentId::text is null or exists (select 1 from comments p where :cmScope and p.brand_id = :brandId and p.ticket_id = :ticketId
        and p.id = :parentId::text and p.deleted_at is null)) as parent_ok`,
      {
        brandId,
        ticketId,
        named: [...named],
        setStatus,
        parentId,
        agentReply: AGENT_REPLY,
        brScope: tenantScope(ctx, 'br'),
        dScope: tenantScope(ctx, 'd'),
        cScope: tenantScope(ctx, 'c'),
        tScope: tenantScope(ctx, 't'),
        pScope: accountScope(ctx, 'p'),
        wScope: tenantScope(ctx, 'w'),
        mScope: accountScope(ctx, 'm'),
        iScope: tenantScope(ctx, 'i'),
        sScope: tenantScope(ctx, 's'),
        cmScope: tenantScope(ctx, 'p'),
      },
    ),
  );
  const r = row!;
  const ticket = r.ticket as Record<string, unknown> | null;
  return {
    brand: r.brand ? Brand.fromJson(columnsToProperties(r.brand as Record<string, unknown>), { skipValidation: true }) : null,
    ticket: ticket && {
      ...(ticket as unknown as NonNullable<Seen['ticket']>),
      createdAt: dateOf(ticket.createdAt)!,
      dueAt: dateOf(ticket.dueAt),
      slaPausedAt: dateOf(ticket.slaPausedAt),
    },
    sendingDomain: (r.sending_domain as Seen['sendingDomain']) ?? null,
    notified: r.notified as Seen['notified'],
    mentioned: r.mentioned as Seen['mentioned'],
    inboundIds: (r.inbound_ids as string[]) ?? [],
    statusOk: Boolean(r.status_ok),
    parentOk: Boolean(r.parent_ok),
  };
}

/**
 * The comment in two statements, or null: not for this one (see the file comment), or the ticket
 * kept changing; then the caller goes step by step.
 */
export async function createInTwoStatements(
  ctx: TenantCtx,
  givenBrandId: string,
  ticketId: string,
  input: CreateCommentInput,
  reopenFrom: readonly string[] = [],
  idempotencyKey?: string,
): Promise<comments.CreateResult | null> {
  if (ctx.db.isTransaction) return null;
  const brandId = normalizeBrandId(givenBrandId);
  if (!canSeeBrand(ctx.brandScope, brandId)) return null;
  const comment = comments.newComment(ctx, input, newId(ID_PREFIX.comment));
  const author = ctx.actor.type === 'user' ? ctx.actor.id : null;
  const named = mentionedMemberIds(comment.body, comment.metadata ?? {});
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const seen = await read(ctx, brandId, ticketId, named, comment.parentId, input.setStatus ?? null);
    const { brand, ticket } = seen;
    if (!brand || !ticket || !seen.statusOk || !seen.parentOk) return null;
    // The rules of the brand's revision (compiled once per revision and process): triggers on comments go step by step.
    const known = await rules.rulesOf(ctx, brand);
    if (known.triggers.some((r) => r.on.includes('comment.created'))) return null;

    let setStatus = input.setStatus;
    if (setStatus === undefined && reopenFrom.includes(ticket.status)) setStatus = 'open';
    const status = setStatus !== undefined && setStatus !== ticket.status ? setStatus : undefined;
    const moved = status ? await clockMoveOf(ctx, brand, { ticketId: ticket.id, fromStatus: ticket.status, to: { status } }, ticket) : { set: {}, changes: [] };
    const changes = status ? [{ field: 'status', from: ticket.status, to: status }, ...moved.changes] : [];

    const mentionedMembers = seen.mentioned.filter((m) => m.id !== author);
    const optedOut = new Set([...seen.notified, ...mentionedMembers.map((m) => ({ ...m, memberId: m.id }))].filter((m) => m.optedOut).map((m) => m.memberId));
    const to = recipientsOf(comment, seen.notified, mentionedMembers, optedOut);
    const customer = customerOf(ticket);
    const authorName = comment.authorName ?? ctx.actor.name;
    const mails =
      to.watching.length || to.mentioned.length || (to.customer && customer)
        ? commentMessages(
            {
              settings: mail.settingsOf(ctx.services),
              key: await mail.replyTokenKey(ctx),
              brand: mail.brandInfo(brand, seen.sendingDomain),
              ticket: mail.ticketInfo(ticket),
              thread: { inboundMessageIds: seen.inboundIds },
            },
            { ...comment, ticketId: ticket.id },
            authorName,
            to,
            customer,
          )
        : [];

    const at = new Date(ctx.services.now());
    const written = await write(ctx, {
      brand,
      ticket,
      comment: { ...comment, createdAt: at, updatedAt: at },
      set: { ...moved.set, ...(status ? { status } : {}) },
      entries: audit.entryRows(ctx, comments.createdEntries(brand.id, ticket, comment, changes)),
      mentioned: mentionedMembers.map((m) => m.id),
      mentionedBy: authorName,
      mails,
      changedFields: changes.map((c) => c.field),
      parentId: comment.parentId,
      setStatus: input.setStatus ?? null,
      rulesRevision: known.revision,
      idempotency:
        idempotencyKey === undefined ? undefined : { key: idempotencyKey, fingerprint: requestFingerprint('POST', `/brands/${brand.id}/tickets/${ticketId}/comments`, input) },
    });
    if (written) return { created: true, comment: comments.toView(written) };
    // Nothing written: the ticket changed since the read, or the key is held (step by step tells which).
    if (idempotencyKey !== undefined) return null;
  }
  return null;
}

interface Write {
  brand: Brand;
  ticket: NonNullable<Seen['ticket']>;
  comment: comments.NewComment & { createdAt: Date; updatedAt: Date };
  set: Parameters<typeof ticketUpdateParts>[3];
  entries: Record<string, unknown>[];
  mentioned: string[];
  mentionedBy: string | null;
  mails: readonly MailMessage[];
  changedFields: string[];
  parentId: string | null;
  setStatus: string | null;
  rulesRevision: number;
  idempotency?: { key: string; fingerprint: string };
}

/** The second statement: everything, or nothing when what was read changed since. Returns the comment written. */
async function write(ctx: TenantCtx, w: Write): Promise<Comment | null> {
  const { brand, ticket, comment } = w;
  const guard: SqlFragment = {
    sql: `${versionSql('t')} = ?
      and exists (select 1 from brands br where ? and ${sameTenant('br', 't')} and br.id = t.brand_id and br.settings_revision = ? and br.rules_revision = ?)
      and (?::text is null or exists (select 1 from statuses s where ? and ${sameTenant('s', 't')} and s.brand_id = t.brand_id and s.key = ?::text))
      and (?::text is null or exists (select 1 from comments p where ? and ${sameTenant('p', 't')} and p.brand_id = t.brand_id and p.ticket_id = t.id and p.id = ?::text and p.deleted_at is null))`,
    bindings: [
      ticket.version,
      tenantScope(ctx, 'br'),
      brand.settingsRevision,
      w.rulesRevision,
      w.setStatus,
      tenantScope(ctx, 's'),
      w.setStatus,
      w.parentId,
      tenantScope(ctx, 'p'),
      w.parentId,
    ],
  };
  // The key's claim, made only while the ticket's row is there to write (`b`).
  const claim =
    w.idempotency &&
    claimRowsStatement(ctx, {
      sql: 'select ?::text as key, ?::text as fingerprint, ?::text as resource_id where exists (select 1 from b)',
      bindings: [w.idempotency.key, w.idempotency.fingerprint, comment.id],
    });
  const ticketParts = ticketUpdateParts(
    ctx,
    brand.id,
    [ticket.id],
    { ...w.set, commentCount: ctx.db.raw('comment_count + 1'), updatedAt: ctx.db.raw('now()'), ...comments.messageMoment(ctx, comment) },
    {
      guard,
      gate: claim && { cte: { sql: `claimed as (${claim.sql})`, bindings: claim.bindings }, writeWhen: { sql: 'exists (select 1 from claimed)', bindings: [] } },
    },
  )!;
  const inserted: SqlFragment = { sql: 'exists (select 1 from c)', bindings: [] };
  const entries = audit.insertRowsStatement(w.entries, inserted);
  const announced = eventsInsert(
    ctx,
    [
      events.commentCreatedEvent(brand.id, { ...comment, ticketId: ticket.id, deletedAt: null }),
      ...(w.changedFields.length ? events.ticketsUpdatedEvents(brand.id, [{ ticketId: ticket.id, changes: w.changedFields }]) : []),
    ],
    'a',
  );
  const mentioned = w.mentioned.length
    ? mentions.recordParts(ctx, { brandId: brand.id, ticketId: ticket.id, commentId: comment.id, mentionedBy: w.mentionedBy, memberIds: w.mentioned }, inserted)
    : null;
  const mailParts = w.mails.length
    ? mail.queueMailsParts(
        ctx,
        brand.id,
        w.mails.map((message) => ({ ticketId: ticket.id, message })),
        inserted,
      )
    : null;
  const values = {
    account_id: ctx.accountId,
    livemode: ctx.livemode,
    brand_id: brand.id,
    ticket_id: ticket.id,
    id: comment.id,
    body: comment.body,
    author_id: comment.authorId,
    author_name: comment.authorName,
    author_type: comment.authorType,
    parent_id: comment.parentId,
    is_internal: comment.isInternal,
    links: comment.links,
    metadata: comment.metadata,
    source: comment.source,
    source_id: comment.sourceId,
    source_data: comment.sourceData,
    cc: comment.cc,
    connection_id: comment.connectionId,
    created_at: comment.createdAt.toISOString(),
    updated_at: comment.updatedAt.toISOString(),
  };
  const columns = Object.keys(values).join(', ');
  // On Citus the statement runs on the account's worker, where a NOTIFY reaches no dispatcher: they are woken from here after it.
  const citus = await onCitus(ctx);
  const queued = ['select 1 from announced', ...(mailParts ? ['select 1 from queued'] : [])].join(' union all ');
  const sql = `with ${ticketParts.sql}, c as (
      insert into comments (${columns}) select ${columns} from jsonb_populate_record(null::comments, ?::jsonb) where exists (select 1 from a)
      returning *
    ), entries as (${entries.sql}
    ), announced as (${announced.sql}
      returning 1
    )${mentioned ? `, ${mentioned.sql}` : ''}${mailParts ? `, ${mailParts.sql}` : ''}
    select c.*, (select 1 from (${queued}) q${wakeDispatchersJoin(!citus)} limit 1) as "announced" from c`;
  const bindings = [
    ...ticketParts.bindings,
    JSON.stringify(values),
    ...entries.bindings,
    ...announced.bindings,
    ...(mentioned?.bindings ?? []),
    ...(mailParts?.bindings ?? []),
  ] as Knex.RawBinding[];
  const [row] = await runInAccount<Record<string, unknown>>(ctx, ctx.db.raw(sql, bindings));
  if (!row) return null;
  const { announced: queuedAny, ...columnsOf } = row;
  if (citus && queuedAny !== null && queuedAny !== undefined) await outboxAdded(ctx, 1);
  return Comment.fromJson(columnsToProperties(columnsOf), { skipValidation: true });
}
