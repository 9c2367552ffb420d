import objection from 'objection';
import type { TenantCtx } from './context.js';

/**
 * Base of every tenant table: rows carry accountId and livemode, and services reach them only
 * through scoped(ctx), the one place the tenant predicate is written.
 */
export class TenantModel extends objection.Model {
  declare accountId: string;
  declare livemode: boolean;

  static scoped<T extends typeof TenantModel>(this: T, ctx: TenantCtx): objection.QueryBuilderType<InstanceType<T>> {
    return this.query(ctx.db)
      .where(`${this.tableName}.accountId`, ctx.accountId)
      .where(`${this.tableName}.livemode`, ctx.livemode) as objection.QueryBuilderType<InstanceType<T>>;
  }
}

/** The scope columns a new tenant row must carry. */
export function scopeOf(ctx: TenantCtx): { accountId: string; livemode: boolean } {
  return { accountId: ctx.accountId, livemode: ctx.livemode };
}
