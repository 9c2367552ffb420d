import { randomBytes } from 'node:crypto';
import { tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../core/context.js';
import { publicBaseUrl } from '../core/config.js';
import { requireBrand } from '../core/brand.js';
import { isPgError, PG } from '../core/db.js';
import { badRequest, unauthorized } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import type { CommercePlatform, CommerceStore } from '../domains/commerce/model.js';
import { upsertOrders } from '../domains/commerce/order-writes.js';
import type { ConnectStoreInput, StoreView } from '../domains/commerce/store-schemas.js';
import * as stores from '../domains/commerce/stores.js';
import { StoreFailed, StoreRefused, type CommerceConnector, type StoreCredentials } from '../integrations/commerce.js';
import { connectorFor } from '../integrations/commerce-connectors.js';

/**
 * Connecting a brand's store, removing it, and the store's notifications: the calls to the store
 * (integrations/commerce.ts) happen before or after the short transactions of domains/commerce,
 * never inside one.
 *
 * Connect checks the credentials against the store, registers the order notifications at the
 * store with a secret ticketd chose (only its SHA-256 is kept), and saves the store due a sync
 * now (the dispatcher's, flows/commerce-sync.ts). A notification must carry that secret; the order
 * it names is fetched again from the store rather than taken from the payload.
 */

/** The connector of a platform, or 400 platform_unavailable. */
export async function connectorOf(ctx: BaseCtx, platform: string): Promise<CommerceConnector> {
  const config = ctx.services.config;
  const connector = await connectorFor(platform, { bigcommerceApiUrl: config.commerceBigcommerceApiUrl, timeoutMs: config.commerceTimeoutMs });
  if (!connector)
    throw badRequest(`ticketd cannot connect ${platform} stores yet: BIGCOMMERCE only`, [{ field: 'platform', message: 'is not available yet' }], 'platform_unavailable');
  return connector;
}

export async function credentialsOf(ctx: BaseCtx, row: CommerceStore): Promise<StoreCredentials> {
  return { storeHash: row.storeHash, accessToken: await stores.tokenOf(ctx, row) };
}

/** Where a store's notifications go: the account and store in the path, so the receiver reads one tenant's row. */
export function notificationUrl(ctx: TenantCtx, platform: string, storeId: string): string {
  return `${publicBaseUrl(ctx.services.config)}/v1/ecommerce/notifications/${platform.toLowerCase()}/${encodeURIComponent(ctx.accountId)}/${encodeURIComponent(storeId)}`;
}

/** Removes a store's hooks, best effort: the store may have revoked the token; the failure is logged, not the caller's. */
async function removeHooksQuietly(ctx: BaseCtx, connector: CommerceConnector, creds: StoreCredentials, hookIds: readonly string[], storeId: string): Promise<void> {
  if (!hookIds.length) return;
  try {
    await connector.removeHooks(creds, hookIds);
  } catch (err) {
    ctx.services.log.warn({ err: (err as Error).message, storeId }, "a store's notification hooks could not be removed at the store");
  }
}

/**
 * POST …/ecommerce/stores/connect: the store, its credentials checked (400 with the store's own
 * words when it refuses them), connected to the brand and due a sync now. The same store again
 * takes the new token and keeps its orders.
 */
export async function connectStore(ctx: TenantCtx, brandId: string, input: ConnectStoreInput): Promise<{ store: StoreView; created: boolean }> {
  const brand = await requireBrand(ctx, brandId);
  const platform = input.platform as CommercePlatform;
  const connector = await connectorOf(ctx, platform);
  const creds: StoreCredentials = { storeHash: input.storeHash.trim(), accessToken: input.accessToken.trim() };
  let info;
  try {
    info = await connector.verify(creds);
  } catch (err) {
    if (err instanceof StoreRefused) throw badRequest(err.message, [{ field: 'accessToken', message: 'was refused by the store' }], 'store_credentials_refused');
    if (err instanceof StoreFailed) throw badRequest(`The store could not be checked: ${err.message}`, undefined, 'store_unreachable');
    throw err;
  }
  const existing = await stores.findByHash(ctx, brand.id, platform, creds.storeHash);
  const id = existing?.id ?? newId(ID_PREFIX.commerceStore);
  const secret = randomBytes(32).toString('base64url');
  let hookIds: string[] = [];
  try {
    hookIds = await connector.registerHooks(creds, notificationUrl(ctx, platform, id), secret);
  } catch (err) {
    // The periodic sync still keeps the store's orders; only the notifications' promptness is lost.
    if (!(err instanceof StoreRefused) && !(err instanceof StoreFailed)) throw err;
    ctx.services.log.warn({ err: err.message, storeId: id }, "a store's order notifications could not be registered: its periodic sync keeps it current");
  }
  let saved;
  try {
    saved = await stores.saveConnection(ctx, brand.id, {
      id,
      platform,
      storeHash: creds.storeHash,
      name: info.name,
      storeUrl: info.storeUrl,
      accessToken: await stores.sealToken(ctx, creds.accessToken),
      notifySecretHash: stores.secretHash(secret),
      hookIds,
    });
  } catch (err) {
    // Nothing was saved: the hooks just registered would notify a store ticketd does not have.
    await removeHooksQuietly(ctx, connector, creds, hookIds, id);
    throw err;
  }
  await removeHooksQuietly(ctx, connector, creds, saved.replacedHookIds, id);
  return { store: saved.store, created: saved.created };
}

/** DELETE …/ecommerce/stores/{id}: gone with its orders and their links; then its hooks are removed at the store, best effort. */
export async function disconnectStore(ctx: TenantCtx, brandId: string, storeId: string): Promise<StoreView> {
  const row = await stores.remove(ctx, brandId, storeId);
  const connector = await connectorFor(row.platform, { bigcommerceApiUrl: ctx.services.config.commerceBigcommerceApiUrl, timeoutMs: ctx.services.config.commerceTimeoutMs });
  if (connector) await removeHooksQuietly(ctx, connector, await credentialsOf(ctx, row), row.hookIds, row.id);
  return { ...stores.toView(row), status: 'DISCONNECTED' };
}

export interface NotificationOutcome {
  received: true;
  /** updated: the order was fetched and written; deferred: the store could not be asked now, a sync will; ignored: nothing ticketd keeps. */
  action: 'updated' | 'deferred' | 'ignored';
}

/**
 * A store's notification (POST /v1/ecommerce/notifications/{platform}/{accountId}/{storeId}). An
 * unknown store and a wrong secret are the same 401, and change nothing. The order it names is
 * fetched from the store and written; a store that cannot be asked now is made due a sync.
 */
export async function receiveNotification(
  base: BaseCtx,
  target: { platform: string; accountId: string; storeId: string },
  secret: (header: string) => string | undefined,
  body: unknown,
): Promise<NotificationOutcome> {
  const platform = target.platform.toUpperCase();
  const row = await stores.findNotified(base, target.accountId, target.storeId);
  const connector =
    row && row.platform === platform
      ? await connectorFor(platform, { bigcommerceApiUrl: base.services.config.commerceBigcommerceApiUrl, timeoutMs: base.services.config.commerceTimeoutMs })
      : null;
  if (!row || !connector || !stores.secretMatches(row, secret(connector.secretHeader))) {
    throw unauthorized('No store by that id is waiting for notifications with this secret', 'invalid_notification_secret');
  }
  if (row.status === 'DISCONNECTED') return { received: true, action: 'ignored' };
  const notice = connector.notice(body);
  if (notice.kind === 'ignored') return { received: true, action: 'ignored' };
  const ctx = tenantCtx(base, row.accountId, row.livemode);
  let order;
  try {
    order = await connector.order(await credentialsOf(ctx, row), notice.platformOrderId);
  } catch (err) {
    if (err instanceof StoreRefused) {
      await stores.recordRefused(ctx, row, err.message);
      return { received: true, action: 'ignored' };
    }
    if (!(err instanceof StoreFailed)) throw err;
    await stores.markDue(ctx, row);
    return { received: true, action: 'deferred' };
  }
  if (!order) return { received: true, action: 'ignored' };
  try {
    await withTx(ctx, (tx) => upsertOrders(tx, row, [order]));
  } catch (err) {
    // The store was disconnected while its order was fetched.
    if (isPgError(err, PG.foreignKeyViolation)) return { received: true, action: 'ignored' };
    throw err;
  }
  return { received: true, action: 'updated' };
}
