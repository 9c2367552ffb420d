import { Type, type Static, type TSchema } from 'typebox';
import type { TenantCtx } from './context.js';

/**
 * The hosted product has two real clients, and on a few routes they read different shapes: the
 * admin dashboard calls with a member's session, the SDK and other integrations with an API key.
 * Where one shape cannot serve both, the credential picks the one its client reads (decision 0095).
 */

/** Whether the caller is the dashboard: a member's session (set by core/auth.ts), as opposed to an API key. */
export function isDashboardCaller(ctx: TenantCtx): boolean {
  return ctx.session !== undefined;
}

/** A 200 whose shape follows the credential: `oneOf` in the OpenAPI document, each branch naming its caller. */
export function ByCredential<S extends TSchema, K extends TSchema>(toSession: S, toApiKey: K, description: string) {
  const branch = (schema: TSchema & { description?: string }, who: string) => ({ ...schema, description: `${who}: ${schema.description ?? ''}` });
  return Type.Unsafe<Static<S> | Static<K>>({
    description,
    oneOf: [branch(toSession, 'To a session (the dashboard)'), branch(toApiKey, 'To an API key (the SDK, integrations)')],
  });
}

/** Records as an object keyed by their id, in their order: the SDK's spelling of a list. */
export function keyedById<T extends { id: string }>(rows: readonly T[]): Record<string, T> {
  return Object.fromEntries(rows.map((r) => [r.id, r]));
}
