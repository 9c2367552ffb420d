import { randomBytes } from 'node:crypto';
import { keyringPart, type SealContext, type SealedColumn } from '../../core/sealed.js';
import { systemActor, withTx, type BaseCtx, type TenantCtx } from '../../core/context.js';
import { badRequest, conflict, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { accountIs, sameTenant, scopeOf, tenantScope } from '../../core/model.js';
import { assertPublicHost, OutboundRefused } from '../../core/outbound.js';
import * as outbox from '../../core/outbox/service.js';
import type { OutboxMessage } from '../../core/outbox/model.js';
import type { SqlFragment } from '../../core/db.js';
import type { Change } from '../../core/audit.js';
import * as audit from '../../core/audit.js';
import { requireBrand } from '../../core/brand.js';
import { Webhook } from './model.js';
import {
  DELIVERY_LIST_LIMIT_DEFAULT,
  type CreateWebhookInput,
  type DeliveryListInput,
  type DeliveryView,
  type RotateSecretInput,
  type UpdateWebhookInput,
  type WebhookView,
  type WebhookWithSecretView,
} from './schemas.js';

/**
 * Webhooks of a brand: registration, and the read side of their deliveries (the outbox rows the
 * dispatcher sends; see server/worker). Secrets are `whsec_` + base64 of 32 random bytes unless
 * the client brings its own; they are stored sealed (the server signs with them, core/sealed.ts)
 * and shown only by create and rotate.
 */

/** Where a webhook's URL may point: the operator's webhookAllowPrivate. */
export interface WebhookPolicy {
  allowPrivate: boolean;
  /**
   * A URL checkWebhookUrl has checked already, outside the caller's transaction: create and
   * update take it as it is (the check resolves its host, network I/O no transaction may wait on).
   */
  checked?: string;
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

export function toView(row: Webhook): WebhookView {
  const createdAt = row.createdAt.toISOString();
  const updatedAt = row.updatedAt.toISOString();
  return {
    id: row.id,
    object: 'webhook',
    brandId: row.brandId,
    url: row.url,
    events: row.events,
    enabled: row.enabled,
    failureCount: row.failureCount,
    lastTriggered: iso(row.lastTriggeredAt),
    lastFailure: row.lastFailure,
    lastFailureAt: iso(row.lastFailureAt),
    disabledReason: row.disabledReason,
    createdAt,
    updatedAt,
    brand_id: row.brandId,
    active: row.enabled,
    created_at: createdAt,
    updated_at: updatedAt,
  };
}

const CONTRACT_STATUS = { pending: 'PENDING', retrying: 'RETRYING', success: 'SUCCESS', failed: 'FAILED', dead: 'FAILED' } as const;

function deliveryView(row: OutboxMessage): DeliveryView {
  const due = row.status === 'pending' || row.status === 'retrying';
  return {
    id: row.id,
    object: 'webhook_delivery',
    webhookId: row.webhookId!,
    event: row.event,
    payload: row.payload,
    status: CONTRACT_STATUS[row.status],
    state: row.status,
    attempts: row.attempts,
    lastAttempt: iso(row.lastAttemptAt),
    nextAttempt: due ? iso(row.availableAt) : null,
    responseCode: row.responseCode,
    responseBody: row.responseBody,
    error: row.lastError,
    createdAt: row.createdAt.toISOString(),
    deliveredAt: iso(row.deliveredAt),
  };
}

/** Webhook secrets are stored sealed (core/sealed.ts); the previous one keeps the sealed text it had. */
export const SEALED_SECRETS: readonly SealedColumn[] = [
  { table: 'webhooks', column: 'secret', purpose: 'webhook.secret' },
  { table: 'webhooks', column: 'previous_secret', purpose: 'webhook.secret' },
];
const SECRET_SEAL = (accountId: string): SealContext => ({ purpose: SEALED_SECRETS[0]!.purpose, accountId });
const sealSecret = (ctx: TenantCtx, secret: string) => ctx.services.get(keyringPart).seal(secret, SECRET_SEAL(ctx.accountId));

export function generateSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** An absolute http(s) URL without credentials whose host may be reached (see core/outbound.ts); normalized. */
export async function checkWebhookUrl(raw: string, policy: WebhookPolicy): Promise<string> {
  const invalid = (why: string) => badRequest(`url ${why}`, [{ field: 'url', message: why }], 'invalid_webhook_url');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid('must be an absolute http:// or https:// URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid('must use http or https');
  if (url.username || url.password) throw invalid('must not contain credentials (sign requests with the secret instead)');
  if (policy.checked === url.toString()) return policy.checked;
  try {
    await assertPublicHost(url, policy.allowPrivate);
  } catch (err) {
    if (!(err instanceof OutboundRefused)) throw err;
    const code = err.code === 'private_address' ? 'webhook_url_not_public' : 'webhook_url_unresolvable';
    throw badRequest(`url refused: ${err.message}`, [{ field: 'url', message: err.message }], code);
  }
  return url.toString();
}

/** `enabled` and its dashboard spelling `active`: either, or both when they agree. */
function enabledOf(input: { enabled?: boolean; active?: boolean }): boolean | undefined {
  if (input.enabled !== undefined && input.active !== undefined && input.enabled !== input.active) {
    throw badRequest('enabled and active are the same setting: send one, or both with the same value', [{ field: 'active', message: 'contradicts enabled' }]);
  }
  return input.enabled ?? input.active;
}

const ofBrand = (ctx: TenantCtx, brandId: string) => Webhook.scoped(ctx).where('webhooks.brandId', brandId);

async function requireWebhook(ctx: TenantCtx, brandId: string, webhookId: string, lock = false): Promise<Webhook> {
  const brand = await requireBrand(ctx, brandId);
  const q = ofBrand(ctx, brand.id).findById(webhookId);
  const row = await (lock ? q.forUpdate() : q);
  if (!row) throw notFound('Webhook');
  return row;
}

export async function list(ctx: TenantCtx, brandId: string): Promise<WebhookView[]> {
  const brand = await requireBrand(ctx, brandId);
  return (await ofBrand(ctx, brand.id).orderBy('id')).map(toView);
}

export async function get(ctx: TenantCtx, brandId: string, webhookId: string): Promise<WebhookView> {
  return toView(await requireWebhook(ctx, brandId, webhookId));
}

export async function create(ctx: TenantCtx, policy: WebhookPolicy, brandId: string, input: CreateWebhookInput): Promise<WebhookWithSecretView> {
  const url = await checkWebhookUrl(input.url, policy);
  const events = [...new Set(input.events)];
  const enabled = enabledOf(input) ?? true;
  const secret = input.secret ?? generateSecret();
  const sealed = await sealSecret(ctx, secret);
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const row = (await Webhook.query(tx.db)
      .insert({
        id: newId(ID_PREFIX.webhook),
        ...scopeOf(tx),
        brandId: brand.id,
        url,
        events,
        secret: sealed,
        enabled,
      })
      .returning('*')) as unknown as Webhook;
    await audit.record(tx, { brandId: brand.id, entityType: 'webhook', entityId: row.id, event: 'webhook.created', metadata: { url, events, enabled } });
    return { ...toView(row), secret };
  });
}

/** PATCH url, events, enabled (or active). Enabling again clears the failure streak and the reason it was disabled. */
export async function update(ctx: TenantCtx, policy: WebhookPolicy, brandId: string, webhookId: string, input: UpdateWebhookInput): Promise<WebhookView> {
  const url = input.url !== undefined ? await checkWebhookUrl(input.url, policy) : undefined;
  const enabled = enabledOf(input);
  return withTx(ctx, async (tx) => {
    const current = await requireWebhook(tx, brandId, webhookId, true);
    const changes: Change[] = [];
    const patch: Partial<Webhook> = {};
    if (url !== undefined && url !== current.url) {
      changes.push({ field: 'url', from: current.url, to: url });
      patch.url = url;
    }
    const events = input.events && [...new Set(input.events)];
    if (events && events.join() !== current.events.join()) {
      changes.push({ field: 'events', from: current.events, to: events });
      patch.events = events;
    }
    if (enabled !== undefined && enabled !== current.enabled) {
      changes.push({ field: 'enabled', from: current.enabled, to: enabled });
      Object.assign(patch, enabled ? { enabled, failureCount: 0, disabledReason: null } : { enabled });
    }
    if (!changes.length) return toView(current);
    const [row] = (await ofBrand(tx, current.brandId)
      .where('webhooks.id', current.id)
      .patch({ ...patch, updatedAt: tx.db.fn.now() as unknown as Date })
      .returning('*')) as unknown as Webhook[];
    await audit.record(tx, { brandId: current.brandId, entityType: 'webhook', entityId: current.id, event: 'webhook.updated', changes });
    return toView(row!);
  });
}

/** Deletes the webhook and its delivery log (messages not yet sent are dropped). Returns it as it was. */
export async function remove(ctx: TenantCtx, brandId: string, webhookId: string): Promise<WebhookView> {
  return withTx(ctx, async (tx) => {
    const row = await requireWebhook(tx, brandId, webhookId, true);
    await ofBrand(tx, row.brandId).where('webhooks.id', row.id).delete();
    await audit.record(tx, { brandId: row.brandId, entityType: 'webhook', entityId: row.id, event: 'webhook.deleted', metadata: { url: row.url, events: row.events } });
    return toView(row);
  });
}

/**
 * A new generated secret, returned once. With graceMinutes the old one keeps signing as well
 * (a second signature in webhook-signature) until then, so receivers can switch without missing
 * a message; X-Dispatch-Signature carries one signature and uses the new secret at once.
 */
export async function rotateSecret(ctx: TenantCtx, brandId: string, webhookId: string, input: RotateSecretInput = {}): Promise<WebhookWithSecretView> {
  const graceMinutes = input.graceMinutes ?? 0;
  const secret = generateSecret();
  const sealed = await sealSecret(ctx, secret);
  return withTx(ctx, async (tx) => {
    const current = await requireWebhook(tx, brandId, webhookId, true);
    const [row] = (await ofBrand(tx, current.brandId)
      .where('webhooks.id', current.id)
      .patch({
        secret: sealed,
        previousSecret: graceMinutes ? current.secret : null,
        previousSecretExpiresAt: graceMinutes ? (tx.db.raw('now() + make_interval(mins => ?)', [graceMinutes]) as unknown as Date) : null,
        updatedAt: tx.db.fn.now() as unknown as Date,
      })
      .returning('*')) as unknown as Webhook[];
    await audit.record(tx, { brandId: current.brandId, entityType: 'webhook', entityId: current.id, event: 'webhook.secret_rotated', metadata: { graceMinutes } });
    return { ...toView(row!), secret };
  });
}

export async function deliveries(ctx: TenantCtx, brandId: string, webhookId: string, input: DeliveryListInput = {}): Promise<DeliveryView[]> {
  const webhook = await requireWebhook(ctx, brandId, webhookId);
  return (await outbox.listForWebhook(ctx, webhook.id, input.limit ?? DELIVERY_LIST_LIMIT_DEFAULT)).map(deliveryView);
}

/** A new delivery of a past one's body, due now (see outbox.redeliver); the webhook must be enabled. */
export async function redeliver(ctx: TenantCtx, brandId: string, webhookId: string, deliveryId: string): Promise<DeliveryView> {
  return withTx(ctx, async (tx) => {
    const webhook = await requireWebhook(tx, brandId, webhookId);
    const original = await outbox.findForWebhook(tx, webhook.id, deliveryId);
    if (!webhook.enabled) throw conflict('This webhook is disabled: enable it (PATCH enabled: true) before redelivering', 'webhook_disabled');
    const copy = await outbox.redeliver(tx, original);
    await audit.record(tx, {
      brandId: webhook.brandId,
      entityType: 'webhook',
      entityId: webhook.id,
      event: 'webhook.redelivered',
      metadata: { deliveryId: original.id, newDeliveryId: copy.id, event: original.event },
    });
    return deliveryView(copy);
  });
}

/** For the brand delete preview. */
export async function countForBrand(ctx: TenantCtx, brandId: string): Promise<number> {
  const r = (await ofBrand(ctx, brandId).count({ n: '*' }).first()) as unknown as { n: string };
  return Number(r.n);
}

// ---------------------------------------------------------------------------------------------
// For the dispatcher and operators (no tenant scope: they work for every account).

/** The tenant a webhook belongs to, for commands that name a webhook by id alone. */
export async function ownerOf(ctx: BaseCtx, webhookId: string): Promise<{ accountId: string; livemode: boolean; brandId: string }> {
  const row = await Webhook.query(ctx.db).findById(webhookId).select('accountId', 'livemode', 'brandId');
  if (!row) throw notFound('Webhook');
  return { accountId: row.accountId, livemode: row.livemode, brandId: row.brandId };
}

export interface DeliveryTarget {
  id: string;
  url: string;
  enabled: boolean;
  /** The secrets to sign with: the current one first, then one still in its rotation grace. */
  secrets: string[];
}

/** The webhook's columns a delivery needs (deliveryTarget). */
interface TargetRow {
  id: string;
  url: string;
  enabled: boolean;
  secret: string;
  previousSecret: string | null;
  previousSecretExpiresAt: Date | string | null;
}

/**
 * The webhook each claimed outbox row of `picked` of this kind is for, as (id, JSON) rows the
 * dispatcher reads with its claim (none when the webhook is gone); deliveryTarget opens it.
 */
export function targetWithClaim(picked: string, accountId: string, kind: string): SqlFragment {
  return {
    sql: `select ${picked}.id, json_build_object('id', w.id, 'url', w.url, 'enabled', w.enabled, 'secret', w.secret, 'previousSecret', w.previous_secret,
    'previousSecretExpiresAt', w.previous_secret_expires_at) as attached from ${picked} join webhooks w
    on ${accountIs('w', '?')} and ${sameTenant('w', picked)} and w.id = ${picked}.webhook_id where ${picked}.kind = ?`,
    bindings: [accountId, kind],
  };
}

/** Where and how to send: from the row read with the claim (targetWithClaim) when given, else read now. */
export async function deliveryTarget(ctx: TenantCtx, webhookId: string, now: Date, withClaim?: unknown): Promise<DeliveryTarget | null> {
  const row =
    withClaim === undefined
      ? ((await Webhook.scoped(ctx).findById(webhookId).select('id', 'url', 'enabled', 'secret', 'previousSecret', 'previousSecretExpiresAt')) ?? null)
      : (withClaim as TargetRow | null);
  if (!row) return null;
  const previousUntil = row.previousSecretExpiresAt ? new Date(row.previousSecretExpiresAt) : null;
  const previous = row.previousSecret && previousUntil && previousUntil > now ? [row.previousSecret] : [];
  const keyring = ctx.services.get(keyringPart);
  const secrets = await Promise.all([row.secret, ...previous].map((s) => keyring.open(s, SECRET_SEAL(ctx.accountId))));
  return { id: row.id, url: row.url, enabled: row.enabled, secrets };
}

/** Attempts that fail in a row, with no success between, before a dead delivery disables the webhook. */
export const DISABLE_AFTER_FAILURES = 16;

export interface AttemptRecord {
  webhookId: string;
  at: Date;
  /** What failed. */
  failure: string;
  /** Disable now, for this reason (410 Gone). */
  disable?: string;
  /** The delivery ran out of attempts: disable if nothing succeeded during the streak either. */
  exhausted?: boolean;
}

/**
 * A success's side on the webhook, as a part of the outbox settle's statement (`settled`: the
 * relation holding the settled row): lastTriggered and a failure count of 0. The common case,
 * kept off the row lock: a busy webhook's successes write it at most once a second.
 */
export function successPart(ctx: TenantCtx, webhookId: string, at: Date, settled: string): outbox.NamedPart {
  return {
    name: 'webhook_succeeded',
    sql: `update webhooks set last_triggered_at = ?, failure_count = 0
      where ? and id = ? and exists (select from ${settled})
      and (failure_count <> 0 or last_triggered_at is null or last_triggered_at < ?::timestamptz - interval '1 second')
      returning id`,
    bindings: [at, tenantScope(ctx, 'webhooks'), webhookId, at],
  };
}

/**
 * The webhook's side of a failed attempt, inside the settle transaction: lastTriggered, the
 * consecutive failure count (a success resets it: successPart), lastFailure, and disabling with an
 * audit entry.
 */
export async function recordAttempt(tx: TenantCtx, a: AttemptRecord): Promise<void> {
  const result = (await tx.db.raw(
    `
    with old as (select id, enabled, failure_count from webhooks where ? and id = ? for update)
    update webhooks w set
      last_triggered_at = ?,
      failure_count = old.failure_count + 1,
      last_failure = ?,
      last_failure_at = ?,
      enabled = w.enabled and d.reason is null,
      disabled_reason = case when w.enabled and d.reason is not null then d.reason else w.disabled_reason end
    from old cross join lateral (select case
        when ?::text is not null then ?::text
        when ? and old.failure_count + 1 >= ? then 'every delivery attempt failed for about three days (' || (old.failure_count + 1) || ' in a row)'
      end as reason) d
    where ? and w.id = old.id
    returning old.enabled and not w.enabled as disabled, w.disabled_reason as reason, w.brand_id as "brandId"`,
    [tenantScope(tx, 'webhooks'), a.webhookId, a.at, a.failure, a.at, a.disable ?? null, a.disable ?? null, Boolean(a.exhausted), DISABLE_AFTER_FAILURES, tenantScope(tx, 'w')],
  )) as {
    rows: { disabled: boolean; reason: string | null; brandId: string }[];
  };
  const row = result.rows[0];
  if (row?.disabled) {
    const ctx = { ...tx, actor: systemActor('dispatcher') };
    await audit.record(ctx, {
      brandId: row.brandId,
      entityType: 'webhook',
      entityId: a.webhookId,
      event: 'webhook.disabled',
      changes: [{ field: 'enabled', from: true, to: false }],
      metadata: { reason: row.reason },
    });
  }
}
