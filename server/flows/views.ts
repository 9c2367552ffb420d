import { requireBrand } from '../core/brand.js';
import type { TenantCtx } from '../core/context.js';
import type { Page } from '../core/pagination.js';
import type { TicketListInput, TicketView } from '../domains/tickets/schemas.js';
import { countsByStatus } from '../domains/tickets/counts.js';
import * as tickets from '../domains/tickets/service.js';
import type { CreateViewInput, UpdateViewInput, ViewCount, ViewTicketsInput, ViewView } from '../domains/views/schemas.js';
import * as views from '../domains/views/service.js';

/**
 * Views as the ticket list runs them: a view's filters and order are the list's own query, so its
 * tickets are the list's page (and cursor), and its count is the list's conditions counted.
 */

/** What the list's schema cannot say is checked when a view is saved, not when it is run. */
export function createView(ctx: TenantCtx, brandId: string, input: CreateViewInput): Promise<ViewView> {
  tickets.checkListFilters(input.filters, 'filters.');
  return views.create(ctx, brandId, input);
}

export function updateView(ctx: TenantCtx, brandId: string, id: string, input: UpdateViewInput): Promise<ViewView> {
  if (input.filters) tickets.checkListFilters(input.filters, 'filters.');
  return views.update(ctx, brandId, id, input);
}

/** The list's query of a view: its filters, its order, and the page asked for. */
const listInput = (view: Pick<ViewView, 'filters' | 'sort'>, page: ViewTicketsInput = {}): TicketListInput =>
  ({ ...view.filters, ...(view.sort.field ? { sort: view.sort.field } : {}), order: view.sort.order, ...page }) as TicketListInput;

/** A page of the view's tickets, exactly as GET …/tickets answers with its filters. */
export async function viewTickets(ctx: TenantCtx, brandId: string, viewId: string, page: ViewTicketsInput): Promise<Page<TicketView>> {
  const brand = await requireBrand(ctx, brandId);
  const view = views.toView(await views.requireView(ctx, brand.id, viewId));
  return tickets.list(ctx, brand.id, listInput(view, page));
}

/** How long a view's count is answered again before it is taken anew. */
export const COUNT_MAX_AGE_MS = 60_000;

/**
 * The count of every view the caller sees. A view on status alone is counted now from the brand's
 * counts kept as tickets change (exact and cheap at any size: `fresh: true`, nothing kept). Of the
 * others, a count taken less than COUNT_MAX_AGE_MS ago (and after the view last changed) is
 * answered as kept, `fresh: false`: tickets changed since are not in it. Any other is taken now by
 * the list's own indexed conditions, `fresh: true`, and kept for the next callers. So a dashboard
 * that polls costs one count per such view a minute, however many poll.
 */
export async function viewCounts(ctx: TenantCtx, brandId: string): Promise<{ data: ViewCount[] }> {
  const brand = await requireBrand(ctx, brandId);
  const { data: visible } = await views.list(ctx, brand.id);
  const now = ctx.services.now();
  const inputs = new Map(visible.map((v) => [v.id, listInput(v)]));
  const cached = visible.filter((v) => !tickets.countedFromRollUps(inputs.get(v.id)!));
  const kept = await views.keptCounts(
    ctx,
    brand.id,
    cached.map((v) => v.id),
    new Date(now - COUNT_MAX_AGE_MS),
  );
  // The views on status alone are counted from one read of the brand's counts by status.
  const byStatus = visible.length > cached.length ? await countsByStatus(ctx, brand.id) : undefined;
  const taken: views.KeptCount[] = [];
  const data: ViewCount[] = [];
  for (const view of visible) {
    const known = kept.get(view.id);
    if (known && known.countedAt.getTime() > Date.parse(view.updatedAt)) {
      data.push({ id: view.id, count: known.count, fresh: false, countedAt: known.countedAt.toISOString() });
      continue;
    }
    const count = await tickets.countMatching(ctx, brand.id, inputs.get(view.id)!, byStatus);
    if (cached.includes(view)) taken.push({ viewId: view.id, count, countedAt: new Date(now) });
    data.push({ id: view.id, count, fresh: true, countedAt: new Date(now).toISOString() });
  }
  await views.keepCounts(ctx, brand.id, taken);
  return { data };
}
