import type objection from 'objection';
import { Type } from 'typebox';
import * as audit from './audit.js';
import { requireBrand, type Brand } from './brand.js';
import { hasRole, withTx, type TenantCtx } from './context.js';
import { badRequest, conflict, forbidden, notFound } from './errors.js';
import { isPgError, PG } from './db.js';
import { newId } from './ids.js';
import type { TenantModel } from './model.js';

/**
 * What a brand keeps shared or personal (macros, views): a row is the brand's (`ownerId` null),
 * seen by everyone in the brand and managed by its owners and admins (and API keys), or personal
 * to the member who owns it, seen and managed by that member alone (another member, an admin or an
 * API key reads it as 404). The role check on a brand's row is here, on the row: the route's
 * permission lets any member in, since a member manages their personal ones.
 */

export const VISIBILITIES = ['brand', 'personal'] as const;
export type Visibility = (typeof VISIBILITIES)[number];
export const VisibilitySchema = Type.Union(
  VISIBILITIES.map((v) => Type.Literal(v)),
  { description: 'brand: shared with everyone in the brand (owners and admins manage it); personal: the member’s own' },
);

export interface SavedRow {
  id: string;
  brandId: string;
  name: string;
  visibility: Visibility;
  ownerId: string | null;
  createdBy: string | null;
  createdAt: Date;
  updatedAt: Date;
}

type SavedModel = typeof TenantModel;
type Query = objection.QueryBuilder<TenantModel, TenantModel[]>;

/** The member a session signs in; an API key has none. */
const memberOf = (ctx: TenantCtx): string | null => ctx.session?.memberId ?? null;

/**
 * The owner a row of this visibility takes when the caller saves it so: a brand's one takes an
 * admin's session or an API key (403 insufficient_role for a member), a personal one a member's
 * session (400 for an API key, which is no one's).
 */
export function ownerFor(ctx: TenantCtx, visibility: Visibility, what: string): string | null {
  if (visibility === 'brand') {
    if (ctx.session && !hasRole(ctx.session.role, 'admin'))
      throw forbidden(`A ${what} shared in the brand takes the admin role or above; your role is ${ctx.session.role}: make it personal instead`, 'insufficient_role');
    return null;
  }
  const member = memberOf(ctx);
  if (!member)
    throw badRequest(
      `A personal ${what} belongs to a member: an API key manages the brand's ${what}s only`,
      [{ field: 'visibility', message: "must be brand for an API key (personal ones are a member's)" }],
      'personal_needs_member',
    );
  return member;
}

export interface SavedKind<R extends SavedRow, V> {
  model: SavedModel;
  /** The audit entity and event prefix ('macro': macro.created, …) and the id prefix. */
  entity: string;
  idPrefix: string;
  /** How errors name it: 'Macro'. */
  label: string;
  toView(row: R): V;
  /** The fields whose changes the `<entity>.updated` entry lists. */
  audited: readonly (keyof V & string)[];
}

/** A create: the common fields, and the kind's own columns. */
export interface SavedInput {
  name: string;
  visibility: Visibility;
}

/** A check of the kind's own columns against the brand, once the caller may write them (400 after 404 and 403). */
export type SavedCheck<R> = (tx: TenantCtx, brand: Brand, fields: Partial<R>) => Promise<void>;

/** The reads and writes of one kind of saved item, under a brand, as the caller may see and manage them. */
export function savedItems<R extends SavedRow, V>(kind: SavedKind<R, V>) {
  const table = kind.model.tableName;
  const nameTaken = (name: string) => conflict(`A ${kind.entity} named "${name}" already exists here`, `${kind.entity}_name_taken`);
  const saving = async <T>(write: PromiseLike<T>, name: string): Promise<T> => {
    try {
      return await write;
    } catch (err) {
      throw isPgError(err, PG.uniqueViolation) ? nameTaken(name) : err;
    }
  };

  /** The brand's rows the caller sees: the brand's, and the caller's own personal ones. */
  const visible = (ctx: TenantCtx, brandId: string): Query => {
    const member = memberOf(ctx);
    return kind.model
      .scoped(ctx)
      .where(`${table}.brandId`, brandId)
      .where((q) => (member ? q.whereNull(`${table}.ownerId`).orWhere(`${table}.ownerId`, member) : q.whereNull(`${table}.ownerId`))) as unknown as Query;
  };

  /** A row the caller sees (404 otherwise), locked when it is to change. */
  async function find(ctx: TenantCtx, brandId: string, id: string, lock = false): Promise<R> {
    const query = visible(ctx, brandId).where(`${table}.id`, id).first();
    const row = (await (lock ? query.forUpdate() : query)) as unknown as R | undefined;
    if (!row) throw notFound(kind.label);
    return row;
  }

  /** Changing or deleting a brand's row takes an admin; a personal row the caller sees is their own. */
  const assertMayChange = (ctx: TenantCtx, row: R) => {
    if (row.visibility === 'brand') ownerFor(ctx, 'brand', kind.entity);
  };

  const record = (tx: TenantCtx, row: R, verb: string, changes?: audit.Change[]) =>
    audit.record(tx, {
      brandId: row.brandId,
      entityType: kind.entity,
      entityId: row.id,
      event: `${kind.entity}.${verb}`,
      changes,
      metadata: { name: row.name, visibility: row.visibility },
    });

  return {
    find,

    async list(ctx: TenantCtx, brandId: string): Promise<{ data: V[] }> {
      const brand = await requireBrand(ctx, brandId);
      const rows = (await visible(ctx, brand.id).orderBy([{ column: `${table}.name` }, { column: `${table}.id` }])) as unknown as R[];
      return { data: rows.map(kind.toView) };
    },

    async get(ctx: TenantCtx, brandId: string, id: string): Promise<V> {
      const brand = await requireBrand(ctx, brandId);
      return kind.toView(await find(ctx, brand.id, id));
    },

    /** Creates a row with the kind's own columns (`fields`). */
    async create(ctx: TenantCtx, brandId: string, input: SavedInput, fields: Partial<R>, check?: SavedCheck<R>): Promise<V> {
      const ownerId = ownerFor(ctx, input.visibility, kind.entity);
      return withTx(ctx, async (tx) => {
        const brand = await requireBrand(tx, brandId);
        await check?.(tx, brand, fields);
        const now = new Date(tx.services.now());
        const name = input.name.trim();
        const row = (await saving(
          kind.model
            .query(tx.db)
            .insert({
              ...fields,
              id: newId(kind.idPrefix),
              accountId: tx.accountId,
              livemode: tx.livemode,
              brandId: brand.id,
              name,
              visibility: input.visibility,
              ownerId,
              createdBy: tx.actor.id,
              createdAt: now,
              updatedAt: now,
            } as never)
            .returning('*'),
          name,
        )) as unknown as R;
        await record(tx, row, 'created');
        return kind.toView(row);
      });
    },

    /** Changes a row (the caller's to change); `fields` are the kind's own columns to set. */
    async update(ctx: TenantCtx, brandId: string, id: string, input: Partial<SavedInput>, fields: (current: R) => Partial<R>, check?: SavedCheck<R>): Promise<V> {
      return withTx(ctx, async (tx) => {
        const brand = await requireBrand(tx, brandId);
        const row = await find(tx, brand.id, id, true);
        assertMayChange(tx, row);
        const visibility = input.visibility ?? row.visibility;
        const ownerId = visibility === row.visibility ? row.ownerId : ownerFor(tx, visibility, kind.entity);
        const name = input.name?.trim() ?? row.name;
        const own = fields(row);
        await check?.(tx, brand, own);
        const patch = { ...own, name, visibility, ownerId };
        const changes = audit.changesBetween(kind.toView(row) as object, kind.toView({ ...row, ...patch }) as object, kind.audited as never);
        // Nothing changes: nothing is written, updatedAt stays.
        if (!changes.length) return kind.toView(row);
        const [updated] = (await saving(
          kind.model
            .scoped(tx)
            .where(`${table}.id`, row.id)
            .patch({ ...patch, updatedAt: new Date(tx.services.now()) } as never)
            .returning('*'),
          name,
        )) as unknown as R[];
        if (!updated) throw notFound(kind.label);
        await record(tx, updated, 'updated', changes);
        return kind.toView(updated);
      });
    },

    async remove(ctx: TenantCtx, brandId: string, id: string): Promise<V> {
      return withTx(ctx, async (tx) => {
        const brand = await requireBrand(tx, brandId);
        const row = await find(tx, brand.id, id, true);
        assertMayChange(tx, row);
        await kind.model.scoped(tx).where(`${table}.id`, row.id).delete();
        await record(tx, row, 'deleted');
        return kind.toView(row);
      });
    },
  };
}
