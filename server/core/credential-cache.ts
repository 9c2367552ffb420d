import { EventEmitter } from 'node:events';
import { afterCommit, type BaseCtx } from './context.js';
import { Listener, notifyAtCommit } from './notify.js';
import { part, type Services } from './services.js';

/**
 * What a credential (an API key, a session) grants, kept in memory for a short time after one
 * database read, so that authenticating a request usually costs no query. Each entry carries tags
 * (the ids whose change must end it: the key; the session, its member and its account). Every
 * change that can end or narrow a credential sends NOTIFY on the cache's channel with those ids in
 * its transaction; each process LISTENs and drops the tagged entries when the change commits. The
 * process that made the change drops them itself right after its commit, so the very next request
 * it serves sees the change. While the LISTEN connection is down the cache is emptied and bypassed
 * (every request reads the database) until it is back. Where each brand lives (its account and
 * mode), which every brand route checks before its body is read, is kept the same way (core/brand.ts).
 */
export interface CacheEntry {
  /** The ids whose change ends this entry. */
  tags: readonly string[];
  cachedUntil: number;
}

const MAX_ENTRIES = 10_000;

export class CredentialCache<E extends CacheEntry> {
  private readonly byHash = new Map<string, E>();
  private readonly hashesByTag = new Map<string, Set<string>>();
  /** Bumped by every drop: a read that started before a drop must not store what it read. */
  private generation = 0;
  readonly events = new EventEmitter();
  readonly stats = { hits: 0, misses: 0, drops: 0 };

  constructor(
    private readonly listener: Listener,
    readonly ttl: number,
  ) {
    listener.on('notification', (_channel: string, tag: string) => this.drop([tag]));
    listener.on('up', () => {
      this.clear();
      this.events.emit('up');
    });
    listener.on('down', () => {
      this.clear();
      this.events.emit('down');
    });
  }

  /** Serving from memory only while notifications can reach us. */
  get live(): boolean {
    return this.listener.live;
  }

  /** The entry for a secret's hash; notifications that already reached this process are applied first. */
  async lookup(hash: string, now: number): Promise<E | null> {
    let entry = this.get(hash, now);
    if (entry) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      entry = this.get(hash, now);
    }
    if (entry) this.stats.hits++;
    else this.stats.misses++;
    return entry;
  }

  private get(hash: string, now: number): E | null {
    if (!this.live) return null;
    const entry = this.byHash.get(hash);
    if (!entry) return null;
    if (entry.cachedUntil <= now) {
      // Plain expiry, not an invalidation: no generation bump, so concurrent reads of others still cache.
      this.forget(hash, entry);
      return null;
    }
    return entry;
  }

  /** Taken before a database read; set() refuses what was read if a drop came in between. */
  token(): number {
    return this.generation;
  }

  set(hash: string, entry: E, token: number): void {
    if (!this.live || token !== this.generation) return;
    if (this.byHash.size >= MAX_ENTRIES) this.clear();
    this.byHash.set(hash, entry);
    for (const tag of entry.tags) {
      let hashes = this.hashesByTag.get(tag);
      if (!hashes) this.hashesByTag.set(tag, (hashes = new Set()));
      hashes.add(hash);
    }
  }

  drop(tags: readonly string[]): void {
    this.generation++;
    for (const tag of tags) {
      for (const hash of this.hashesByTag.get(tag) ?? []) {
        const entry = this.byHash.get(hash);
        if (entry) this.forget(hash, entry);
      }
      this.hashesByTag.delete(tag);
      this.stats.drops++;
      this.events.emit('drop', tag);
    }
  }

  private forget(hash: string, entry: E): void {
    this.byHash.delete(hash);
    for (const tag of entry.tags) {
      const hashes = this.hashesByTag.get(tag);
      hashes?.delete(hash);
      if (hashes?.size === 0) this.hashesByTag.delete(tag);
    }
  }

  clear(): void {
    this.generation++;
    this.byHash.clear();
    this.hashesByTag.clear();
  }

  get size(): number {
    return this.byHash.size;
  }

  /** Resolves once every notification committed before the call has been applied. */
  sync(): Promise<void> {
    return this.listener.sync();
  }

  close(): Promise<void> {
    this.clear();
    return this.listener.close();
  }
}

/**
 * The NOTIFY channel of each kind of credential, and of the brands credentials reach (core/brand.ts
 * assertBrandVisible); a payload is one tag.
 */
export const CREDENTIAL_CHANNELS = { apiKeys: 'ticketd_api_keys', sessions: 'ticketd_sessions', brands: 'ticketd_brands' } as const;
export type CredentialKind = keyof typeof CREDENTIAL_CHANNELS;

/** This process's caches, one per kind, started by the API (a process without one reads the database every time). */
const caches = part(
  'credentialCaches',
  () => new Map<CredentialKind, CredentialCache<CacheEntry>>(),
  async (started) => {
    for (const cache of started.values()) await cache.close();
  },
);

export function startCredentialCache<E extends CacheEntry>(services: Services, kind: CredentialKind, ttlMs: number): CredentialCache<E> {
  const started = services.get(caches);
  if (!started.has(kind)) started.set(kind, new CredentialCache<E>(Listener.forServices(services, [CREDENTIAL_CHANNELS[kind]]).start(), ttlMs));
  return started.get(kind) as CredentialCache<E>;
}

export function credentialCacheOf<E extends CacheEntry>(services: Services, kind: CredentialKind): CredentialCache<E> | null {
  return (services.get(caches).get(kind) as CredentialCache<E> | undefined) ?? null;
}

/**
 * Inside the transaction of a change that ends or narrows credentials tagged with `tags`: every
 * process hears it when the change commits, and this one forgets them right after its commit.
 */
export async function credentialsChanged(ctx: BaseCtx, kind: CredentialKind, tags: readonly string[]): Promise<void> {
  if (!tags.length) return;
  await notifyAtCommit(ctx, CREDENTIAL_CHANNELS[kind], tags);
  afterCommit(ctx, () => credentialCacheOf(ctx.services, kind)?.drop(tags));
}
