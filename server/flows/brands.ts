import { withTx, type TenantCtx } from '../core/context.js';
import { requireBrand } from '../core/brand.js';
import * as audit from '../core/audit.js';
import { tenantScope } from '../core/model.js';
import * as attachments from '../domains/attachments/service.js';
import * as apiKeys from '../domains/api-keys/service.js';
import * as billing from '../domains/billing/service.js';
import * as brands from '../domains/brands/service.js';
import * as members from '../domains/members/service.js';
import * as rawMails from '../domains/raw-mails/service.js';
import type { BrandView, CreateBrandInput, DeleteBrandResultView } from '../domains/brands/schemas.js';
import * as statuses from '../domains/statuses/service.js';
import * as ticketCounts from '../domains/tickets/counts.js';

/** A brand with its system statuses, in one transaction (the statuses are part of its brand.created entry, not entries of their own). */
export async function createBrand(ctx: TenantCtx, input: CreateBrandInput): Promise<BrandView> {
  return withTx(ctx, async (tx) => {
    const brand = await brands.create(tx, input);
    // The plan counts live brands; test mode is for trying things out.
    if (tx.livemode) await billing.assertWithinPlan(tx, 'brands');
    await statuses.createSystemStatuses(tx, brand.id);
    return brand;
  });
}

type ContentCounts = Omit<DeleteBrandResultView, 'id' | 'deleted' | 'message'>;

/**
 * What deleting a brand removes, in one statement: tickets that are not deleted, custom statuses
 * only (every brand has the four system ones), and every other kind of record in the brand.
 */
async function contentCounts(ctx: TenantCtx, brandId: string): Promise<ContentCounts> {
  const count = (table: string, extra = '') => ctx.db.raw(`(select count(*) from ${table} x where ? and x.brand_id = ?${extra})::int`, [tenantScope(ctx, 'x'), brandId]);
  const {
    rows: [counts],
  } = (await ctx.db.raw(
    `select
      ? as "ticketCount", ? as "webhookCount", ? as "categoryCount", ? as "tagCount", ? as "statusCount",
      ? as "fieldCount", ? as "contactCount", ? as "companyCount", ? as "blockedSourceCount"`,
    [
      count('tickets', ' and x.deleted_at is null'),
      count('webhooks'),
      count('categories'),
      count('tags'),
      count('statuses', ' and not x.is_system'),
      count('field_definitions'),
      count('contacts'),
      count('companies'),
      count('blocked_sources'),
    ],
  )) as { rows: ContentCounts[] };
  return counts!;
}

/** Without confirm: a preview of what would go. With it: the brand and everything in it, atomically. */
export async function deleteBrand(ctx: TenantCtx, brandId: string, confirm: boolean): Promise<DeleteBrandResultView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const counts = await contentCounts(tx, brand.id);
    if (!confirm) {
      return { id: brand.id, deleted: false, ...counts, message: 'Nothing was deleted. Repeat the request with ?confirm=true to delete this brand and everything in it.' };
    }
    await rawMails.forgetBrand(tx, brand.id);
    await attachments.forgetBrand(tx, brand.id);
    await brands.deleteRow(tx, brand.id);
    await ticketCounts.forgetBrand(tx, brand.id);
    await apiKeys.forgetBrand(tx, brand.id);
    await members.forgetBrand(tx, brand.id);
    // Everything in the brand goes with it: this one entry (with the counts) stands for all of it.
    await audit.record(tx, { brandId: brand.id, entityType: 'brand', entityId: brand.id, event: 'brand.deleted', metadata: { name: brand.name, slug: brand.slug, ...counts } });
    return { id: brand.id, deleted: true, ...counts, message: `Brand "${brand.name}" and everything in it were deleted.` };
  });
}
