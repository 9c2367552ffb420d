import { Type, type Static } from 'typebox';
import { Nullable, Timestamp } from '../../core/schemas.js';

export const StoreParams = Type.Object({
  brandId: Type.String({ minLength: 1, maxLength: 64, description: 'Brand id (`br_…`; `ws_…` is accepted too)' }),
  storeId: Type.String({ minLength: 1, maxLength: 64 }),
});

const Platform = Type.Union([Type.Literal('BIGCOMMERCE'), Type.Literal('SHOPIFY'), Type.Literal('WOOCOMMERCE')]);
const Status = Type.Union([Type.Literal('PENDING_SETUP'), Type.Literal('SYNCING'), Type.Literal('ACTIVE'), Type.Literal('ERROR'), Type.Literal('DISCONNECTED')], {
  description:
    'PENDING_SETUP: connected, its first sync not finished; ACTIVE: synced, kept up to date; SYNCING: a sync runs; ERROR: the last sync failed (errorMessage), tried again later; DISCONNECTED: the store refused the token: connect again',
});

/** A connected store, as the dashboard reads it (its access token never comes out). */
export const StoreOut = Type.Object({
  id: Type.String(),
  brandId: Type.String(),
  name: Type.String({ description: "The store's name, as the platform gave it on connect" }),
  platform: Platform,
  storeUrl: Nullable(Type.String({ description: "The storefront's address; an order's page is <storeUrl>/manage/orders/<platformOrderId>" })),
  storeId: Type.String({ description: "The platform's id of the store (BigCommerce's store hash)" }),
  status: Status,
  lastSyncAt: Nullable(Timestamp),
  errorMessage: Nullable(Type.String()),
  errorCount: Type.Integer({ description: 'Syncs that failed since the last one that went through' }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const ConnectStoreBody = Type.Object(
  {
    platform: Type.Union([Type.Literal('BIGCOMMERCE'), Type.Literal('SHOPIFY'), Type.Literal('WOOCOMMERCE')], {
      description: 'BIGCOMMERCE today; the others answer 400 platform_unavailable',
    }),
    accessToken: Type.String({
      minLength: 1,
      maxLength: 500,
      pattern: '^\\S+$',
      description:
        "A store API account's access token (scopes: orders, customers and products read-only, store information read-only, and read-write for its notifications); kept sealed, never shown",
    }),
    storeHash: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$', description: "BigCommerce's store hash (stores/{hash} in the API path)" }),
    code: Type.Optional(Type.String({ maxLength: 2000, description: 'OAuth: typed by the dashboard, not used (connect with accessToken and storeHash)' })),
    redirectUri: Type.Optional(Type.String({ maxLength: 2048, description: 'OAuth: typed by the dashboard, not used' })),
  },
  { additionalProperties: false },
);

export type StoreView = Static<typeof StoreOut>;
export type ConnectStoreInput = Static<typeof ConnectStoreBody>;
