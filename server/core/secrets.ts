import { randomBytes } from 'node:crypto';
import type { Db } from './db.js';

/**
 * A server-wide secret (e.g. the key that signs attachment URLs): 32 random bytes generated once,
 * by whichever process asks first, and stored in `server_secrets`, so every ticketd process on
 * the database shares it and it survives restarts. Never logged; callers cache the value.
 */
export async function serverSecret(db: Db, name: string): Promise<Buffer> {
  // ON CONFLICT DO NOTHING: two processes racing on the first start both read the one winner.
  await db.raw('insert into server_secrets (name, value) values (?, ?) on conflict (name) do nothing', [name, randomBytes(32).toString('base64')]);
  const row = (await db('server_secrets').where({ name }).first('value')) as { value: string };
  return Buffer.from(row.value, 'base64');
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
