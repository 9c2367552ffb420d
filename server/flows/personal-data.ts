import type { TenantCtx } from '../core/context.js';
import { deleteQueuingFiles } from '../core/file-deletions.js';
import { sameTenant, tenantScope } from '../core/model.js';

/**
 * What ticketd holds about a customer, removed or made anonymous: the primitives of a contact's
 * erasure (flows/contact-erasure.ts), each one set-based over the person's rows of one brand, so
 * that a person with thousands of tickets costs a few statements. Every one runs in the caller's
 * transaction and names the tenant (and the brand) on every table, so on Citus it stays on the
 * account's shards. The inventory of the columns each covers is decision 0120.
 *
 * A Person is a contact as it was before: its email and name are what is searched for in text the
 * team wrote about it (titles, replies, the audit log's old values), and replaced by the tombstone.
 */
export interface Person {
  brandId: string;
  contactId: string;
  email: string;
  name: string | null;
  /** What replaces the email and the name wherever they are found (an `ers_` id). */
  tombstone: string;
}

/** What a redacted message body becomes. */
export const REDACTED = '[erased]';

/** The address an erased contact keeps (contacts need one): the tombstone at a domain that never resolves (RFC 2606). */
export const tombstoneEmail = (tombstone: string) => `${tombstone}@erased.invalid`;

const ARE_SPECIAL = /[\\^$.|?*+()[\]{}]/g;

/**
 * The PostgreSQL regular expression (case-insensitive with the 'gi' flags) of the person's email,
 * not inside a longer address (ann@x.com in joann@x.com or ann@x.com.au), and, when it has one,
 * name as whole words (a short name does not eat into other words).
 */
export function personPattern(person: Pick<Person, 'email' | 'name'>): string {
  const escape = (s: string) => s.replace(ARE_SPECIAL, '\\$&');
  const parts = [`(?<![[:alnum:]._%+-])${escape(person.email)}(?![[:alnum:]_-]|\\.[[:alnum:]])`];
  const name = person.name?.trim();
  if (name) parts.push(`${/^\w/.test(name) ? '\\m' : ''}${escape(name)}${/\w$/.test(name) ? '\\M' : ''}`);
  return `(?:${parts.join('|')})`;
}

/**
 * Positional bindings in the order the SQL text names them: `b(value)` gives the placeholder and
 * keeps the value (a template literal is evaluated left to right).
 */
function binder(): ((value: unknown) => string) & { values: unknown[] } {
  const values: unknown[] = [];
  return Object.assign(
    (value: unknown) => {
      values.push(value);
      return '?';
    },
    { values },
  );
}
type Bind = ReturnType<typeof binder>;

/** SQL replacing the person in a text expression. */
const scrubText = (b: Bind, p: Person, expr: string) => `regexp_replace(${expr}, ${b(personPattern(p))}, ${b(p.tombstone)}, 'gi')`;
/** The same in a JSON value, through its text (the tombstone needs no escaping in JSON). */
const scrubJson = (b: Bind, p: Person, expr: string) => `(${scrubText(b, p, `${expr}::text`)})::jsonb`;
/** Whether a text expression names the person. */
const names = (b: Bind, p: Person, expr: string) => `${expr} ~* ${b(personPattern(p))}`;

/** The ids of the tickets the contact is the customer of, deleted ones included. */
export async function ticketIdsOf(tx: TenantCtx, person: Person): Promise<string[]> {
  const r = (await tx.db.raw(`select t.id from tickets t where ? and t.brand_id = ? and t.customer_id = ? order by t.id`, [
    tenantScope(tx, 't'),
    person.brandId,
    person.contactId,
  ])) as { rows: { id: string }[] };
  return r.rows.map((row) => row.id);
}

/**
 * The person's comments, as a condition on `c` over comments: a customer's comment of theirs (the
 * portal's name the contact) or, with no author named (mail replies), on one of their tickets.
 */
function personsComment(b: Bind, person: Person, ticketIds: readonly string[]): string {
  return `(c.author_type = 'CUSTOMER' and (c.author_id = ${b(person.contactId)} or (c.author_id is null and c.ticket_id = any(${b([...ticketIds])}::text[]))))`;
}

/**
 * Comments: those the person wrote (on any ticket of the brand) lose their body, their mail
 * metadata and their copies; the others on the person's tickets keep their text with the person's
 * email and name replaced. Returns how many the person wrote.
 */
export async function redactComments(tx: TenantCtx, person: Person, ticketIds: readonly string[]): Promise<number> {
  const b = binder();
  const theirs = () => personsComment(b, person, ticketIds);
  const sql = `update comments c set
        body = case when ${theirs()} then ${b(REDACTED)} else ${scrubText(b, person, 'c.body')} end,
        author_name = case when ${theirs()} then ${b(person.tombstone)} else ${scrubText(b, person, 'c.author_name')} end,
        source_data = case when ${theirs()} then null else ${scrubJson(b, person, 'c.source_data')} end,
        metadata = case when ${theirs()} then '{}'::jsonb else ${scrubJson(b, person, 'c.metadata')} end,
        cc = array(select ${scrubText(b, person, 'x')} from unnest(c.cc) as x),
        links = ${scrubJson(b, person, 'c.links')}
      where ${b(tenantScope(tx, 'c'))} and c.brand_id = ${b(person.brandId)} and (${theirs()} or c.ticket_id = any(${b([...ticketIds])}::text[]))
      returning ${theirs()} as theirs`;
  const r = (await tx.db.raw(sql, b.values as never[])) as { rows: { theirs: boolean }[] };
  return r.rows.filter((row) => row.theirs).length;
}

/**
 * The attachments the person sent (on their tickets with no comment, on a comment of theirs, sent
 * from their address, or uploaded through the portal) are deleted, their files queued for removal
 * after the commit. Returns their ids. Runs before redactComments, which forgets who wrote what.
 */
export async function deletePersonAttachments(tx: TenantCtx, person: Person, ticketIds: readonly string[]): Promise<string[]> {
  const b = binder();
  // The comments' tenant bound too, not only correlated: on Citus the statement then stays on the account's node.
  const sql = `${b(tenantScope(tx, 'f'))} and f.brand_id = ${b(person.brandId)} and (f.portal_customer_id = ${b(person.contactId)} or lower(f.uploaded_by) = ${b(person.email)}
      or (f.ticket_id = any(${b([...ticketIds])}::text[]) and f.comment_id is null)
      or exists (select 1 from comments c where ${b(tenantScope(tx, 'c'))} and ${sameTenant('c', 'f')} and c.brand_id = f.brand_id and c.ticket_id = f.ticket_id and c.id = f.comment_id
          and ${personsComment(b, person, ticketIds)}))`;
  const gone = await deleteQueuingFiles(tx, 'attachments', { sql, bindings: b.values });
  return gone.map((row) => row.id);
}

/**
 * The record of the mail the person sent: the inbound log keeps the tombstone as its sender and
 * forgets the authentication results; messages held for review go. Mail queued to them or about
 * their tickets keeps its record with the person replaced.
 */
export async function redactMail(tx: TenantCtx, person: Person, ticketIds: readonly string[]): Promise<void> {
  await tx.db.raw(
    `with mine as (
       select i.account_id, i.livemode, i.id from inbound_emails i where ? and i.brand_id = ? and (lower(i.from_email) = ? or i.ticket_id = any(?::text[]))
     ), held as (
       delete from held_inbound_emails h using mine m where ? and ${sameTenant('h', 'm')} and h.inbound_email_id = m.id
     )
     update inbound_emails i set from_email = ?, authentication = null
       from mine m where ? and ${sameTenant('i', 'm')} and i.id = m.id`,
    // Each table named with the tenant itself, so on Citus every part stays on the account's shards.
    [tenantScope(tx, 'i'), person.brandId, person.email, [...ticketIds], tenantScope(tx, 'h'), tombstoneEmail(person.tombstone), tenantScope(tx, 'i')],
  );
  const b = binder();
  const sql = `update mail_messages m set message = ${scrubJson(b, person, 'm.message')}
      where ${b(tenantScope(tx, 'm'))} and m.brand_id = ${b(person.brandId)} and (m.ticket_id = any(${b([...ticketIds])}::text[]) or ${names(b, person, 'm.message::text')})`;
  await tx.db.raw(sql, b.values as never[]);
}

/**
 * The person's tickets stay (numbers, states, counts) but lose what the person wrote: the body is
 * redacted, the title and the fields keep their text with the person replaced, and the names the
 * tickets are listed and searched by are the tombstone's. Deleted tickets too. Runs after the
 * contact is made anonymous and its attachments are gone (their count is taken again here).
 */
export async function redactTickets(tx: TenantCtx, person: Person, ticketIds: readonly string[]): Promise<void> {
  if (!ticketIds.length) return;
  const b = binder();
  const body = () => `case when t.body is null then null else ${b(REDACTED)} end`;
  const sql = `update tickets t set
        title = ${scrubText(b, person, 't.title')},
        body = ${body()},
        custom_fields = ${scrubJson(b, person, 't.custom_fields')},
        metadata = ${scrubJson(b, person, 't.metadata')},
        links = ${scrubJson(b, person, 't.links')},
        source_data = null,
        close_reason = ${scrubText(b, person, 't.close_reason')},
        customer_sort = ticketd_person_sort(c.name, c.email),
        customer_text = ticketd_person_text(c.name, c.email),
        search_vector = ticketd_ticket_vector(${scrubText(b, person, 't.title')}, ticketd_person_text(c.name, c.email), ${body()}),
        attachment_count = (select count(*) from attachments a where ${sameTenant('a', 't')} and a.brand_id = t.brand_id and a.ticket_id = t.id and a.status = 'UPLOADED')
      from contacts c
      where ${b(tenantScope(tx, 'c'))} and c.brand_id = ${b(person.brandId)} and c.id = ${b(person.contactId)}
        and ${sameTenant('t', 'c')} and t.brand_id = c.brand_id and t.id = any(${b([...ticketIds])}::text[])`;
  await tx.db.raw(sql, b.values as never[]);
}

/** Satisfaction ratings keep their score; the person's comment on them goes. Returns how many ratings. */
export async function redactRatings(tx: TenantCtx, person: Person): Promise<number> {
  const r = (await tx.db.raw(`update ticket_feedback f set comment = case when f.comment is null then null else ? end where ? and f.brand_id = ? and f.contact_id = ?`, [
    REDACTED,
    tenantScope(tx, 'f'),
    person.brandId,
    person.contactId,
  ])) as { rowCount: number | null };
  return r.rowCount ?? 0;
}

/** The person's portal access ends: their tokens and sign-in links are deleted. Returns how many tokens. */
export async function revokePortalAccess(tx: TenantCtx, person: Person): Promise<number> {
  await tx.db.raw(`delete from portal_links p where ? and p.brand_id = ? and p.contact_id = ?`, [tenantScope(tx, 'p'), person.brandId, person.contactId]);
  const r = (await tx.db.raw(`delete from portal_tokens p where ? and p.brand_id = ? and p.contact_id = ?`, [tenantScope(tx, 'p'), person.brandId, person.contactId])) as {
    rowCount: number | null;
  };
  return r.rowCount ?? 0;
}

/** Orders a connected store synced for the person's address show the tombstone (a later sync may bring the store's copy back). */
export async function anonymizeOrders(tx: TenantCtx, person: Person): Promise<void> {
  const b = binder();
  const sql = `update commerce_orders o set customer_email = ${b(tombstoneEmail(person.tombstone))}, customer_name = ${b(person.tombstone)}, items = ${scrubJson(b, person, 'o.items')}
      where ${b(tenantScope(tx, 'o'))} and o.brand_id = ${b(person.brandId)} and lower(o.customer_email) = ${b(person.email)}`;
  await tx.db.raw(sql, b.values as never[]);
}

/**
 * The audit log's entries about the contact, its tickets, or made by it through the portal keep
 * their facts with the person replaced in their old values, metadata and performer's name; those
 * of the attachments deleted (attachmentIds) lose the file's name too.
 */
export async function redactAuditEntries(tx: TenantCtx, person: Person, ticketIds: readonly string[], attachmentIds: readonly string[]): Promise<void> {
  const b = binder();
  const deletedFile = () => `(a.entity_type = 'attachment' and a.entity_id = any(${b([...attachmentIds])}::text[]))`;
  // The file name's object is a value: Citus takes only IMMUTABLE functions within an UPDATE's CASE.
  const sql = `update audit_log a set changes = ${scrubJson(b, person, 'a.changes')},
        metadata = ${scrubJson(b, person, 'a.metadata')} || case when ${deletedFile()} then ${b(JSON.stringify({ filename: REDACTED }))}::jsonb else '{}'::jsonb end,
        performer_name = ${scrubText(b, person, 'a.performer_name')}
      where ${b(tenantScope(tx, 'a'))} and a.brand_id = ${b(person.brandId)}
        and (a.ticket_id = any(${b([...ticketIds])}::text[]) or a.entity_id = ${b(person.contactId)} or a.performer_id = ${b(person.contactId)})
        and (${names(b, person, 'a.changes::text')} or ${names(b, person, 'a.metadata::text')} or ${names(b, person, 'a.performer_name')} or ${deletedFile()})`;
  // The only UPDATE of audit_log: its guard lets it through while the transaction says so, and only
  // if the entry's facts (what, who, when) stay as they were (migration 20261204020000).
  await tx.db.raw(`select set_config('ticketd.redacting_audit', 'on', true)`);
  await tx.db.raw(sql, b.values as never[]);
  await tx.db.raw(`select set_config('ticketd.redacting_audit', 'off', true)`);
}

/**
 * Webhook and mail messages of the brand that name the person: mail not yet sent to or about them
 * is dropped; every other message (delivered or not) keeps its body with the person replaced, as
 * do the receivers' answers kept with it.
 */
export async function redactOutbox(tx: TenantCtx, person: Person): Promise<void> {
  const named = (b: Bind) => `(${names(b, person, 'o.payload::text')} or ${names(b, person, 'o.response_body')} or ${names(b, person, 'o.last_error')})`;
  const d = binder();
  const drop = `delete from outbox o where ${d(tenantScope(tx, 'o'))} and o.brand_id = ${d(person.brandId)} and o.kind = 'mail' and o.status in ('pending', 'retrying') and ${named(d)}`;
  await tx.db.raw(drop, d.values as never[]);
  const b = binder();
  const sql = `update outbox o set payload = ${scrubJson(b, person, 'o.payload')}, response_body = ${scrubText(b, person, 'o.response_body')},
        last_error = ${scrubText(b, person, 'o.last_error')}
      where ${b(tenantScope(tx, 'o'))} and o.brand_id = ${b(person.brandId)} and ${named(b)}`;
  await tx.db.raw(sql, b.values as never[]);
}

/** The contact keeps its id (its tickets still point at it) and becomes the tombstone: no name, address, picture or metadata of its own. */
export async function anonymizeContact(tx: TenantCtx, person: Person, now: Date): Promise<void> {
  await tx.db.raw(
    `update contacts c set email = ?, name = ?, name_key = ?, avatar_url = null, metadata = '{}'::jsonb, notify_email = false, updated_at = ?
      where ? and c.brand_id = ? and c.id = ?`,
    [tombstoneEmail(person.tombstone), person.tombstone, person.tombstone, now, tenantScope(tx, 'c'), person.brandId, person.contactId],
  );
}
