import * as audit from '../core/audit.js';
import { requireBrand, type Brand } from '../core/brand.js';
import { dryRun, withTx, type TenantCtx } from '../core/context.js';
import { badRequest, HttpError } from '../core/errors.js';
import type { CommentView } from '../domains/comments/schemas.js';
import type { Macro } from '../domains/macros/model.js';
import type { ApplyMacroInput, CreateMacroInput, MacroView, UpdateMacroInput } from '../domains/macros/schemas.js';
import * as macros from '../domains/macros/service.js';
import { applyFieldAction, isFieldAction } from '../domains/rules/engine.js';
import { render, templateProblem } from '../domains/rules/templates.js';
import type { TicketView } from '../domains/tickets/schemas.js';
import * as tickets from '../domains/tickets/service.js';
import { createComment } from './comment-create.js';
import { invalidReferences, referenceProblems } from './rules.js';
import { lockLiveTicket, updateTicket } from './ticket-update.js';
import { carryOutActions, leastLoaded, stateChanges, stateOfView, templateData, type StatePatch } from './triggers.js';

/**
 * Macros as members use them: saved with everything they name checked against the brand (as a
 * trigger's actions), and applied to tickets as the caller's own change: the fields their actions
 * set go through ticket update (so the brand's triggers run on them, and the audit log names the
 * caller), then the comment, its template rendered on the ticket as it became, then their side
 * effects; one transaction per ticket.
 */

/** Everything the macro names must be the brand's: 400 invalid_rule naming the path. */
async function checkReferences(tx: TenantCtx, brand: Brand, fields: Partial<Pick<Macro, 'actions' | 'comment'>>): Promise<void> {
  const problems = await referenceProblems(tx, brand, null, fields.actions ?? []);
  const template = fields.comment ? templateProblem(tx.services, fields.comment.body) : null;
  if (template) problems.push({ field: 'comment.body', message: `is not a usable template: ${template}` });
  if (problems.length) throw invalidReferences(problems);
}

export const createMacro = (ctx: TenantCtx, brandId: string, input: CreateMacroInput): Promise<MacroView> => macros.create(ctx, brandId, input, checkReferences);

export const updateMacro = (ctx: TenantCtx, brandId: string, id: string, input: UpdateMacroInput): Promise<MacroView> => macros.update(ctx, brandId, id, input, checkReferences);

/** A macro the caller sees whose references the brand still has (else 400 before any ticket is touched). */
async function usableMacro(ctx: TenantCtx, brandId: string, macroId: string): Promise<Macro> {
  const brand = await requireBrand(ctx, brandId);
  const macro = await macros.requireMacro(ctx, brand.id, macroId);
  await checkReferences(ctx, brand, macro);
  return macro;
}

interface Applied {
  ticket: TicketView;
  comment: CommentView | null;
}

/** The fields the macro's actions set on the ticket, as an update's input (empty when they change nothing). */
async function fieldChanges(tx: TenantCtx, brand: Brand, macro: Macro, ticket: TicketView): Promise<StatePatch> {
  const before = stateOfView(ticket);
  // Actions replace what they change (never change it in place): a shallow copy keeps the rest the same objects.
  const after = { ...before };
  for (const action of macro.actions.filter(isFieldAction)) await applyFieldAction(after, action, (ids) => leastLoaded(tx, brand.id, ids));
  return stateChanges(before, after);
}

/** The macro's comment on the ticket: its template rendered on the ticket as it is, by the caller. */
async function addComment(tx: TenantCtx, brand: Brand, macro: Macro, comment: NonNullable<Macro['comment']>, ticket: TicketView): Promise<CommentView> {
  const body = await render(tx.services, comment.body, await templateData(tx, brand, ticket, null));
  if (!body.trim()) throw badRequest('The macro’s comment renders empty on this ticket', [{ field: 'comment.body', message: 'renders empty on this ticket' }], 'empty_comment');
  const metadata = { isInternal: comment.isInternal, macro: { id: macro.id, name: macro.name } };
  return (await createComment(tx, brand.id, ticket.id, { body, metadata })).comment;
}

/** The macro on one ticket, in the caller's transaction tx. */
async function applyInTx(tx: TenantCtx, brandId: string, macro: Macro, ticketId: string): Promise<Applied> {
  const brand = await requireBrand(tx, brandId);
  const before = await tickets.fetchView(tx, brand.id, await lockLiveTicket(tx, brand.id, ticketId));
  const patch = await fieldChanges(tx, brand, macro, before);
  let ticket = Object.keys(patch).length ? (await updateTicket(tx, brand.id, before.id, patch)).ticket : before;
  const comment = macro.comment ? await addComment(tx, brand, macro, macro.comment, ticket) : null;
  const sideEffects = macro.actions.filter((a) => !isFieldAction(a));
  await carryOutActions(tx, { id: macro.id, name: macro.name, kind: 'macro' }, sideEffects, { brand, ticket, autoSubmitted: false });
  await audit.record(tx, {
    brandId: brand.id,
    ticketId: ticket.id,
    entityType: 'macro',
    entityId: macro.id,
    event: 'macro.applied',
    metadata: { name: macro.name, ticketNumber: ticket.ticketNumber },
  });
  // The comment (and the triggers it ran) and the side effects changed the ticket again.
  if (comment || sideEffects.length) ticket = await tickets.fetchView(tx, brand.id, ticket.id);
  return { ticket, comment };
}

export interface ApplyResult {
  ticketId: string;
  ok: boolean;
  ticket?: TicketView;
  comment?: CommentView | null;
  error?: { statusCode: number; code: string; message: string; errors?: { field: string; message: string }[] };
}

/** Why a ticket failed, as the error shape says it; what the client did not cause is logged, not told. */
function failure(ctx: TenantCtx, ticketId: string, err: unknown): ApplyResult['error'] {
  if (err instanceof HttpError) return { statusCode: err.statusCode, code: err.code, message: err.message, ...(err.errors ? { errors: err.errors } : {}) };
  ctx.log?.warn({ err, ticketId }, 'a macro could not be applied to a ticket');
  return { statusCode: 500, code: 'internal_error', message: 'The macro could not be applied to this ticket; nothing of it was kept' };
}

/**
 * Applies the macro to each ticket, one transaction each, in the order given: a ticket that fails
 * (not found, refused by its brand's rules) is left as it was and said so; the others are applied.
 */
export async function applyMacro(ctx: TenantCtx, brandId: string, macroId: string, input: ApplyMacroInput): Promise<{ data: ApplyResult[] }> {
  const macro = await usableMacro(ctx, brandId, macroId);
  const data: ApplyResult[] = [];
  for (const ticketId of input.ticketIds ?? [input.ticketId!]) {
    try {
      const applied = await withTx(ctx, (tx) => applyInTx(tx, brandId, macro, ticketId));
      data.push({ ticketId, ok: true, ...applied });
    } catch (err) {
      data.push({ ticketId, ok: false, error: failure(ctx, ticketId, err) });
    }
  }
  return { data };
}

/**
 * The ticket and comment as the macro would leave them: applied in a transaction that is rolled
 * back, so the brand's triggers are seen as well, and nothing is written.
 */
export async function previewMacro(ctx: TenantCtx, brandId: string, macroId: string, ticketId: string) {
  const macro = await usableMacro(ctx, brandId, macroId);
  const { ticket, comment } = await dryRun(ctx, (tx) => applyInTx(tx, brandId, macro, ticketId));
  return { ticket, comment: comment && { body: comment.body, isInternal: comment.isInternal } };
}
