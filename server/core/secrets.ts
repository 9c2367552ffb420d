import { createHash, randomBytes } from 'node:crypto';
import type { Db } from './db.js';
import { part, type Services } from './services.js';

/**
 * A server-wide secret (e.g. the key that signs attachment URLs): 32 random bytes generated once,
 * by whichever process asks first, and stored in `server_secrets`, so every ticketd process on
 * the database shares it and it survives restarts. Never logged; callers cache the value.
 */
export async function serverSecret(db: Db, name: string): Promise<Buffer> {
  return (await readOrMakeServerSecret(db, name)).value;
}

/**
 * serverSecret, and whether this call made it: then, inside a transaction, it is not committed
 * yet (and a rollback takes it away).
 */
async function readOrMakeServerSecret(db: Db, name: string): Promise<{ value: Buffer; made: boolean }> {
  // ON CONFLICT DO NOTHING: two processes racing on the first start both read the one winner.
  const inserted = await db.raw<{ rows: unknown[] }>('insert into server_secrets (name, value) values (?, ?) on conflict (name) do nothing returning name', [
    name,
    randomBytes(32).toString('base64'),
  ]);
  const row = (await db('server_secrets').where({ name }).first('value')) as { value: string };
  return { value: Buffer.from(row.value, 'base64'), made: inserted.rows.length > 0 };
}

/**
 * serverSecret read through the caller's connection (in its transaction: no second connection to
 * wait for) and kept by the process once read as a committed row; a transaction that made it
 * keeps nothing, since a rollback would take it away.
 */
export function keptServerSecret(name: string): (ctx: { db: Db; services: Services }) => Promise<Buffer> {
  const keptPart = part(`secrets.${name}`, () => ({ value: null as Buffer | null }));
  return async (ctx) => {
    const kept = ctx.services.get(keptPart);
    if (kept.value) return kept.value;
    const { value, made } = await readOrMakeServerSecret(ctx.db, name);
    if (!made) kept.value = value;
    return value;
  };
}

/** serverSecret, read once per process; a failed read (database down) is retried next time. */
export function cachedServerSecret(db: Db, name: string): () => Promise<Buffer> {
  let value: Promise<Buffer> | null = null;
  return () => {
    value ??= serverSecret(db, name).catch((err: unknown) => {
      value = null;
      throw err;
    });
    return value;
  };
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** 43 base62 characters carry 256 bits. */
export const TOKEN_RANDOM_LENGTH = 43;

/** Uniformly random base62 text: the secret part of API keys, session and sign-in tokens. */
export function randomBase62(length = TOKEN_RANDOM_LENGTH): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62]; // 248 = 4 * 62: no modulo bias
    }
  }
  return out;
}

/**
 * How bearer secrets are stored: their SHA-256, hex. The secrets carry 256 random bits, so a fast
 * unsalted hash is enough (nothing to guess) and lets authentication find the row by the hash.
 */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}
