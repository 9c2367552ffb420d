import type { TenantCtx } from '../../core/context.js';
import { badRequest } from '../../core/errors.js';
import { ID_PREFIX } from '../../core/ids.js';
import { savedItems, type SavedCheck } from '../../core/saved-items.js';
import { Macro } from './model.js';
import type { CreateMacroInput, MacroAction, MacroComment, MacroView, UpdateMacroInput } from './schemas.js';

/**
 * A brand's macros, shared or personal (core/saved-items.ts). What their actions and comment name
 * is checked against the brand by the flow that saves them, and applying one is a flow too
 * (flows/macros.ts).
 */

export function toView(row: Macro): MacroView {
  return {
    id: row.id,
    object: 'macro',
    brandId: row.brandId,
    name: row.name,
    visibility: row.visibility,
    ownerId: row.ownerId,
    actions: row.actions,
    comment: row.comment,
    createdBy: row.createdBy,
    createdAt: new Date(row.createdAt).toISOString(),
    updatedAt: new Date(row.updatedAt).toISOString(),
  };
}

const macros = savedItems<Macro, MacroView>({
  model: Macro,
  entity: 'macro',
  idPrefix: ID_PREFIX.macro,
  label: 'Macro',
  toView,
  audited: ['name', 'visibility', 'actions', 'comment'],
});

export const { list, get, remove } = macros;

/** A macro the caller sees (404 otherwise), as stored. */
export const requireMacro = (ctx: TenantCtx, brandId: string, id: string): Promise<Macro> => macros.find(ctx, brandId, id);

const commentOf = (comment: MacroComment | null | undefined): Macro['comment'] => (comment ? { body: comment.body, isInternal: comment.isInternal ?? false } : null);

/** A macro must do something: an action or a comment. */
function checkNotEmpty(actions: readonly MacroAction[], comment: Macro['comment']): void {
  if (!actions.length && !comment)
    throw badRequest('A macro needs at least one action or a comment', [{ field: 'actions', message: 'must not be empty when there is no comment' }], 'empty_macro');
}

/** `check`: the references of its actions and comment, by the flow that saves it. */
export async function create(ctx: TenantCtx, brandId: string, input: CreateMacroInput, check?: SavedCheck<Macro>): Promise<MacroView> {
  const comment = commentOf(input.comment);
  checkNotEmpty(input.actions, comment);
  return macros.create(ctx, brandId, input, { actions: input.actions, comment }, check);
}

/** A macro saved again is checked whole: the parts not sent too (they may name something since deleted). */
export async function update(ctx: TenantCtx, brandId: string, id: string, input: UpdateMacroInput, check?: SavedCheck<Macro>): Promise<MacroView> {
  const fields = (current: Macro) => {
    const actions = input.actions ?? current.actions;
    const comment = input.comment === undefined ? current.comment : commentOf(input.comment);
    checkNotEmpty(actions, comment);
    return { actions, comment };
  };
  return macros.update(ctx, brandId, id, input, fields, check);
}
