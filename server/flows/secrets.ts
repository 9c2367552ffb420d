import type { BaseCtx } from '../core/context.js';
import { addTableKey, keyringPart, rewrapColumn, type SealedColumn } from '../core/sealed.js';
import * as brandDomains from '../domains/brand-domains/service.js';
import * as commerceStores from '../domains/commerce/stores.js';
import * as emailConnections from '../domains/email-connections/service.js';
import * as sso from '../domains/sso/service.js';
import * as webhooks from '../domains/webhooks/service.js';

/** Every column of sealed secrets (core/sealed.ts), for rotation. */
export const SEALED_COLUMNS: readonly SealedColumn[] = [
  ...webhooks.SEALED_SECRETS,
  ...brandDomains.SEALED_SECRETS,
  ...emailConnections.SEALED_SECRETS,
  ...sso.SEALED_SECRETS,
  ...commerceStores.SEALED_SECRETS,
];

export interface Rotation {
  /** The id of the key everything is sealed with now. */
  keyId: string;
  /** Whether a new key was made in the database (no encryptionKeys configured). */
  newKey: boolean;
  /** Rows re-wrapped (or sealed, if they were plain text), by `table.column`. */
  rewrapped: Record<string, number>;
}

/**
 * `ticketd secrets rotate-key`. Without configured keys: a new key in the database, then every
 * secret re-wrapped with it. With them: every secret re-wrapped with the first configured key (put
 * the new one first, keep the old ones listed until this has run). Plain text left by versions
 * that stored secrets unsealed is sealed. Other processes go on meanwhile: they open values of
 * either key and seal with the new one within a minute.
 */
export async function rotateKey(ctx: BaseCtx): Promise<Rotation> {
  const keyring = ctx.services.get(keyringPart);
  const newKey = !ctx.services.config.encryptionKeys.length;
  if (newKey) {
    await keyring.current(); // the first key exists before the next is added
    await addTableKey(ctx.db);
  }
  keyring.forget();
  const keyId = (await keyring.current()).id;
  const rewrapped: Record<string, number> = {};
  for (const c of SEALED_COLUMNS) rewrapped[`${c.table}.${c.column}`] = await rewrapColumn(ctx.db, keyring, c);
  return { keyId, newKey, rewrapped };
}
