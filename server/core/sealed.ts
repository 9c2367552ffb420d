import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { Db } from './db.js';
import { part } from './services.js';

/**
 * Envelope encryption of the secrets ticketd must use itself (mailbox passwords and refresh
 * tokens, DKIM private keys, webhook signing secrets): each secret under its own data key
 * (AES-256-GCM), the data key wrapped by a key-encryption key (KEK). Rotating the KEK re-wraps
 * the data keys and leaves the secrets' ciphertexts alone.
 *
 * KEKs come from the configuration (encryptionKeys: base64 of 32 bytes; the first seals, every
 * one opens) or, when it names none, from server_secrets (`encryption-key:<n>`, the highest n
 * seals; made on first use, a new one by `ticketd secrets rotate-key`). Keys of the table open
 * even when the configuration names some, so an installation can move its keys out of the
 * database. A KEK is named by the start of its SHA-256: a sealed value says which key opens it
 * and nothing of the key.
 *
 * Sealed text: `v1:<kek id>:<wrapped data key>:<ciphertext>`, each part iv.body.tag in base64url.
 * The associated data binds a value to what it is and whose: copied into another column or
 * another account, it does not open.
 */

const VERSION = 'v1';
const ALGORITHM = 'aes-256-gcm';
const KEY_BYTES = 32;
const TABLE_KEY_PREFIX = 'encryption-key:';
/** How long a process seals with the KEK it read before reading the table again (a rotation elsewhere). */
const RELOAD_MS = 60_000;

export interface Kek {
  readonly id: string;
  readonly key: Buffer;
}

/** What a sealed value is (`webhook.secret`) and whose (the account id). */
export interface SealContext {
  readonly purpose: string;
  readonly accountId: string;
}

export class SealedSecretError extends Error {
  override name = 'SealedSecretError';
}

export const kekOf = (key: Buffer): Kek => ({ id: createHash('sha256').update(key).digest('hex').slice(0, 16), key });

const associated = (c: SealContext) => `${c.purpose}\n${c.accountId}`;

function encrypt(key: Buffer, plaintext: Buffer, aad: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv(ALGORITHM, key, iv);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return [iv, body, cipher.getAuthTag()].map((b) => b.toString('base64url')).join('.');
}

function decrypt(key: Buffer, text: string, aad: string): Buffer {
  const [iv, body, tag] = text.split('.').map((s) => Buffer.from(s, 'base64url'));
  if (!iv || !body || !tag) throw new SealedSecretError('a sealed secret is malformed');
  const decipher = createDecipheriv(ALGORITHM, key, iv);
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(tag);
  try {
    return Buffer.concat([decipher.update(body), decipher.final()]);
  } catch {
    throw new SealedSecretError('a sealed secret does not open: it was sealed for another column or account, or altered');
  }
}

/** Whether a stored value is sealed (values stored before sealing existed are plain text). */
export const isSealed = (stored: string): boolean => stored.startsWith(`${VERSION}:`);

/** The id of the KEK a sealed value is wrapped with. */
export function kekIdOf(sealed: string): string {
  const id = sealed.split(':')[1];
  if (!isSealed(sealed) || !id) throw new SealedSecretError('not a sealed secret');
  return id;
}

export function sealWith(kek: Kek, plaintext: string, context: SealContext): string {
  const dataKey = randomBytes(KEY_BYTES);
  const wrapped = encrypt(kek.key, dataKey, `data key\n${associated(context)}`);
  return [VERSION, kek.id, wrapped, encrypt(dataKey, Buffer.from(plaintext, 'utf8'), associated(context))].join(':');
}

function parts(sealed: string): { kekId: string; wrapped: string; payload: string } {
  const [version, kekId, wrapped, payload, ...rest] = sealed.split(':');
  if (version !== VERSION || !kekId || !wrapped || !payload || rest.length) throw new SealedSecretError('not a sealed secret');
  return { kekId, wrapped, payload };
}

export function openWith(keks: ReadonlyMap<string, Kek>, sealed: string, context: SealContext): string {
  const { kekId, wrapped, payload } = parts(sealed);
  const kek = keks.get(kekId);
  if (!kek) throw new SealedSecretError(`a sealed secret needs the encryption key ${kekId}, which this server does not have`);
  const dataKey = decrypt(kek.key, wrapped, `data key\n${associated(context)}`);
  return decrypt(dataKey, payload, associated(context)).toString('utf8');
}

/** The same secret with its data key wrapped by `kek` (the ciphertext is kept). */
export function rewrapWith(keks: ReadonlyMap<string, Kek>, kek: Kek, sealed: string, context: SealContext): string {
  const { kekId, wrapped, payload } = parts(sealed);
  const old = keks.get(kekId);
  if (!old) throw new SealedSecretError(`a sealed secret needs the encryption key ${kekId}, which this server does not have`);
  const dataKey = decrypt(old.key, wrapped, `data key\n${associated(context)}`);
  return [VERSION, kek.id, encrypt(kek.key, dataKey, `data key\n${associated(context)}`), payload].join(':');
}

/** A configured key: base64 of 32 bytes. */
export function parseKey(base64: string): Buffer {
  const key = Buffer.from(base64, 'base64');
  if (key.length !== KEY_BYTES) throw new SealedSecretError(`an encryption key must be ${KEY_BYTES} bytes in base64 (openssl rand -base64 32)`);
  return key;
}

interface Loaded {
  readonly current: Kek;
  readonly all: ReadonlyMap<string, Kek>;
  readonly at: number;
}

async function tableKeys(db: Db): Promise<{ n: number; kek: Kek }[]> {
  const rows = (await db('server_secrets').where('name', 'like', `${TABLE_KEY_PREFIX}%`).select('name', 'value')) as { name: string; value: string }[];
  return rows.map((r) => ({ n: Number(r.name.slice(TABLE_KEY_PREFIX.length)), kek: kekOf(Buffer.from(r.value, 'base64')) })).sort((a, b) => a.n - b.n);
}

/** Adds the table's next KEK (the first one when there is none); a concurrent add of the same number wins, and both use it. */
export async function addTableKey(db: Db): Promise<void> {
  const next = ((await tableKeys(db)).at(-1)?.n ?? 0) + 1;
  await db.raw('insert into server_secrets (name, value) values (?, ?) on conflict (name) do nothing', [`${TABLE_KEY_PREFIX}${next}`, randomBytes(KEY_BYTES).toString('base64')]);
}

/**
 * A process's keys: read on first use, again after RELOAD_MS (so a rotation done elsewhere is
 * sealed with soon) and whenever a value names a key not read yet.
 */
export class Keyring {
  private loaded: Promise<Loaded> | null = null;

  constructor(
    private readonly db: Db,
    private readonly configured: readonly Buffer[],
    private readonly now: () => number,
  ) {}

  private async load(): Promise<Loaded> {
    let table = await tableKeys(this.db);
    if (!this.configured.length && !table.length) {
      await addTableKey(this.db);
      table = await tableKeys(this.db);
    }
    const configured = this.configured.map(kekOf);
    const all = new Map([...table.map((t) => [t.kek.id, t.kek] as const), ...configured.map((k) => [k.id, k] as const)]);
    return { current: configured[0] ?? table.at(-1)!.kek, all, at: this.now() };
  }

  private async keys(reload = false): Promise<Loaded> {
    const stale = async () => !this.loaded || (await this.loaded).at + RELOAD_MS < this.now();
    if (reload || (await stale())) {
      this.loaded = this.load().catch((err: unknown) => {
        this.loaded = null;
        throw err;
      });
    }
    return this.loaded!;
  }

  /** Forgets what was read: the next call reads the keys again (after a rotation in this process). */
  forget(): void {
    this.loaded = null;
  }

  async current(): Promise<Kek> {
    return (await this.keys()).current;
  }

  async seal(plaintext: string, context: SealContext): Promise<string> {
    return sealWith((await this.keys()).current, plaintext, context);
  }

  /** The secret; a value stored before sealing existed (plain text) is returned as it is. */
  async open(stored: string, context: SealContext): Promise<string> {
    if (!isSealed(stored)) return stored;
    let keys = await this.keys();
    if (!keys.all.has(kekIdOf(stored))) keys = await this.keys(true);
    return openWith(keys.all, stored, context);
  }

  /** `stored` sealed under the current KEK: null when it is already; plain text is sealed. */
  async rewrap(stored: string, context: SealContext): Promise<string | null> {
    const keys = await this.keys();
    if (!isSealed(stored)) return sealWith(keys.current, stored, context);
    if (kekIdOf(stored) === keys.current.id) return null;
    return rewrapWith(keys.all, keys.current, stored, context);
  }
}

/** A column that holds sealed values, and what they are (their purpose in the associated data). */
export interface SealedColumn {
  readonly table: string;
  readonly column: string;
  readonly purpose: string;
}

const REWRAP_BATCH = 500;

/**
 * Re-wraps every value of the column that is not under the keyring's current KEK (plain text
 * stored before sealing is sealed), a batch at a time, each row by its own statement that changes
 * it only if it still holds what was read (a value changed meanwhile was sealed anew). Returns how
 * many rows changed.
 */
export async function rewrapColumn(db: Db, keyring: Keyring, c: SealedColumn): Promise<number> {
  const current = await keyring.current();
  let changed = 0;
  let after: [string, string] = ['', ''];
  for (;;) {
    const { rows } = (await db.raw(
      `select account_id, id, ?? as value from ?? where ?? is not null and ?? not like ? and (account_id, id) > (?, ?) order by account_id, id limit ?`,
      [c.column, c.table, c.column, c.column, `${VERSION}:${current.id}:%`, ...after, REWRAP_BATCH],
    )) as { rows: { account_id: string; id: string; value: string }[] };
    if (!rows.length) return changed;
    for (const row of rows) {
      const next = await keyring.rewrap(row.value, { purpose: c.purpose, accountId: row.account_id });
      if (next === null) continue;
      const result = (await db.raw(`update ?? set ?? = ? where account_id = ? and id = ? and ?? = ?`, [c.table, c.column, next, row.account_id, row.id, c.column, row.value])) as {
        rowCount: number | null;
      };
      changed += result.rowCount ?? 0;
    }
    const last = rows.at(-1)!;
    after = [last.account_id, last.id];
  }
}

export const keyringPart = part('sealed.keyring', (services) => new Keyring(services.db, services.config.encryptionKeys.map(parseKey), () => services.now()));
