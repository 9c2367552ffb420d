import { withTx, type TenantCtx } from '../core/context.js';
import * as audit from '../core/audit.js';
import { AuditEntry } from '../core/audit.js';
import { requireBrand } from '../core/brand.js';
import { notFound } from '../core/errors.js';
import { newId, ID_PREFIX } from '../core/ids.js';
import { tenantScope } from '../core/model.js';
import * as events from '../core/outbox/events.js';
import { normalizeEmail } from '../core/text.js';
import * as personal from './personal-data.js';
import type { Person } from './personal-data.js';
import * as rawMailsOf from '../domains/raw-mails/retention.js';

/**
 * A data subject's erasure (decision 0120): a contact of a brand, or every contact of one email
 * in every brand of the account, made anonymous in ONE transaction with its audit entry (which
 * holds no personal data) and its contact.erased event; the files go by the deletion queue after
 * the commit. The tickets stay, with their numbers and counts. An erased contact is erased once:
 * asked again, the first erasure's result is returned and nothing changes.
 */

export interface ErasureCounts {
  tickets: number;
  comments: number;
  attachments: number;
  rawMails: number;
  ratings: number;
  portalTokens: number;
}

export interface ErasureView {
  contactId: string;
  brandId: string;
  tombstone: string;
  erasedAt: string;
  counts: ErasureCounts;
}

const EVENT = 'contact.erased';

/** The erasure entry of a contact erased already, as its result. */
async function earlierErasure(tx: TenantCtx, brandId: string, contactId: string): Promise<ErasureView | null> {
  const entry = await AuditEntry.scoped(tx).where({ brandId, entityType: 'contact', entityId: contactId, event: EVENT }).first();
  if (!entry) return null;
  const m = entry.metadata as { tombstone: string; erasedAt: string; counts: ErasureCounts };
  return { contactId, brandId, tombstone: m.tombstone, erasedAt: m.erasedAt, counts: m.counts };
}

/** Erases one locked contact (its row as it was) in tx. */
async function eraseLocked(tx: TenantCtx, contact: { brandId: string; id: string; email: string; name: string | null }): Promise<ErasureView> {
  const earlier = await earlierErasure(tx, contact.brandId, contact.id);
  if (earlier) return earlier;
  const person: Person = { brandId: contact.brandId, contactId: contact.id, email: contact.email, name: contact.name, tombstone: newId(ID_PREFIX.erasure) };
  const ticketIds = await personal.ticketIdsOf(tx, person);
  // The tickets are locked before anything is written, so a reply being added to one waits for the erasure.
  if (ticketIds.length)
    await tx.db.raw(`select t.id from tickets t where ? and t.brand_id = ? and t.id = any(?::text[]) order by t.id for update`, [tenantScope(tx, 't'), person.brandId, ticketIds]);
  const now = new Date(tx.services.now());
  const attachmentIds = await personal.deletePersonAttachments(tx, person, ticketIds);
  const comments = await personal.redactComments(tx, person, ticketIds);
  // The raw messages of the person's tickets (theirs and the replies quoting them), their files queued.
  const rawMails = await rawMailsOf.removeOfTickets(tx, person.brandId, ticketIds);
  await personal.redactMail(tx, person, ticketIds);
  const ratings = await personal.redactRatings(tx, person);
  const portalTokens = await personal.revokePortalAccess(tx, person);
  await personal.anonymizeOrders(tx, person);
  await personal.redactAuditEntries(tx, person, ticketIds, attachmentIds);
  await personal.redactOutbox(tx, person);
  await personal.anonymizeContact(tx, person, now);
  await personal.redactTickets(tx, person, ticketIds);
  const view: ErasureView = {
    contactId: person.contactId,
    brandId: person.brandId,
    tombstone: person.tombstone,
    erasedAt: now.toISOString(),
    counts: { tickets: ticketIds.length, comments, attachments: attachmentIds.length, rawMails, ratings, portalTokens },
  };
  await audit.record(tx, {
    brandId: person.brandId,
    entityType: 'contact',
    entityId: person.contactId,
    event: EVENT,
    metadata: { tombstone: view.tombstone, erasedAt: view.erasedAt, counts: view.counts },
  });
  await events.contactErased(tx, { ...view, counts: { ...view.counts } });
  return view;
}

interface ContactRow {
  brandId: string;
  id: string;
  email: string;
  name: string | null;
}

/** Erases a contact of the brand (404 when the brand or contact is not the caller's). */
export async function eraseContact(ctx: TenantCtx, brandId: string, contactId: string): Promise<ErasureView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const r = (await tx.db.raw(`select c.brand_id as "brandId", c.id, c.email, c.name from contacts c where ? and c.brand_id = ? and c.id = ? for update`, [
      tenantScope(tx, 'c'),
      brand.id,
      contactId,
    ])) as { rows: ContactRow[] };
    if (!r.rows[0]) throw notFound('Contact');
    return eraseLocked(tx, r.rows[0]);
  });
}

/**
 * Erases the contacts with this email in every brand of the account (in the caller's mode): one
 * transaction for all. An email no contact has (erased already, or never known) erases nothing.
 */
export async function eraseByEmail(ctx: TenantCtx, rawEmail: string): Promise<{ contacts: ErasureView[] }> {
  const email = normalizeEmail(rawEmail);
  return withTx(ctx, async (tx) => {
    const r = (await tx.db.raw(`select c.brand_id as "brandId", c.id, c.email, c.name from contacts c where ? and c.email = ? order by c.brand_id, c.id for update`, [
      tenantScope(tx, 'c'),
      email,
    ])) as { rows: ContactRow[] };
    const contacts: ErasureView[] = [];
    for (const row of r.rows) contacts.push(await eraseLocked(tx, row));
    return { contacts };
  });
}
