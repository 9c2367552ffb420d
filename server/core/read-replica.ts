import { once } from 'node:events';
import type { FastifyInstance } from 'fastify';
import { batcher } from './batcher.js';
import type { BaseCtx } from './context.js';
import type { Db } from './db.js';
import { Listener } from './notify.js';
import { part, type Services } from './services.js';

/**
 * Reads that may come from a streaming replica (config databaseReadUrl): ticket lists and search,
 * stats and audit logs, each route wrapping its service call in onReplica(). What a credential
 * wrote, it reads back (read-your-writes), whichever API process serves it:
 *
 * - After a write request by a credential (any method but GET, HEAD, OPTIONS), before its response
 *   leaves, the process takes the primary's WAL insert position, which is past the write's commit,
 *   and NOTIFYs it with the credential's id on FENCES_CHANNEL: one statement for all the writes
 *   that end while the previous one runs.
 * - Every API process LISTENs and keeps, per credential, the position of its last write: its fence.
 * - A read by that credential goes to the replica only once the replica has replayed past the
 *   fence (pg_last_wal_replay_lsn, asked again when a read needs a newer answer); until then it
 *   goes to the primary. Fences the replica has passed are forgotten.
 * - Writes announced while the LISTEN connection was down are unknown: each time it is made, the
 *   primary's position then becomes a floor every read waits for; while it is down, reads go to
 *   the primary.
 * - A replica that fails (connection lost, a query cancelled by a recovery conflict) fails no
 *   request: the read runs again on the primary, and the replica rests for a second.
 *
 * Other credentials may read up to the replica's lag behind: they never saw the write.
 */

export const FENCES_CHANNEL = 'ticketd_read_fences';
const REPLICA_REST_MS = 1_000;
/** Beyond this many fences, they collapse into one floor (the newest of them) for everyone. */
const MAX_FENCES = 100_000;
const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);
const PRIMARY_POSITION = 'pg_current_wal_insert_lsn()';
/** A standby's replayed position; the position of a server that is not one (the primary itself, named as its own replica). */
const REPLICA_POSITION = 'case when pg_is_in_recovery() then pg_last_wal_replay_lsn() else pg_current_wal_insert_lsn() end';

const WAL_POSITION = /^[0-9A-F]{1,8}\/[0-9A-F]{1,8}$/i;

/** A WAL position ('16/B374D848') as a number. */
export function walPosition(lsn: string): bigint {
  const [high = '0', low = '0'] = lsn.split('/');
  return (BigInt(`0x${high}`) << 32n) | BigInt(`0x${low}`);
}

/** Errors of the replica itself, not of the read: the same read on the primary may well succeed. */
function replicaTrouble(err: unknown): boolean {
  const e = err as { name?: string; nativeError?: object } | null;
  if (e?.name === 'KnexTimeoutError') return true; // no connection to be had
  const native = (e?.nativeError ?? e) as { severity?: string; code?: string; syscall?: string; message?: string } | null;
  if (native?.severity !== undefined) {
    // From the server: connection exceptions, shutdown and start-up, too many connections, a recovery conflict.
    const code = native.code ?? '';
    return code.startsWith('08') || code.startsWith('57P') || code === '53300' || code === '40001';
  }
  return native?.syscall !== undefined || /^Connection terminated/.test(native?.message ?? ''); // ECONNREFUSED…, a dropped socket
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class ReadRouting {
  private readonly fences = new Map<string, bigint>();
  /** Set once the LISTEN connection is up; null meanwhile (reads go to the primary). */
  private floor: bigint | null = null;
  /** Fences collapsed when there were too many. */
  private collapsed = 0n;
  private generation = 0;
  private flooring: Promise<void> | null = null;
  private replayed = 0n;
  private sampling: Promise<void> | null = null;
  private restingUntil = 0;
  private readonly announce: (group: string, credential: string) => Promise<void>;
  readonly stats = { replica: 0, primary: 0, fallbacks: 0 };

  constructor(
    private readonly services: Services,
    private readonly replica: Db,
    private readonly listener: Listener,
  ) {
    listener.on('notification', (_channel: string, payload: string) => {
      const [lsn = '', ...credentials] = payload.split(' ');
      if (WAL_POSITION.test(lsn)) this.fence(credentials, walPosition(lsn)); // anything else was not sent by ticketd
    });
    listener.on('up', () => {
      this.generation++;
      this.floor = null;
      void this.ensureFloor();
    });
    listener.on('down', () => {
      this.generation++;
      this.floor = null;
    });
    this.announce = batcher<string, void>(
      async (credentials) => {
        const unique = [...new Set(credentials)];
        const { rows } = (await services.db.raw(`select lsn::text as lsn, pg_notify(?, lsn::text || ' ' || ?) from ${PRIMARY_POSITION} as lsn`, [
          FENCES_CHANNEL,
          unique.join(' '),
        ])) as { rows: { lsn: string }[] };
        this.fence(unique, walPosition(rows[0]!.lsn));
        return credentials.map(() => undefined);
      },
      { maxSize: 100 }, // ids of ~30 characters: the payload stays far below NOTIFY's 8,000 bytes
    );
  }

  /** After a write by `credential` committed: its reads wait for the replica to pass it, in every process. */
  wrote(credential: string): Promise<void> {
    return this.announce('fences', credential);
  }

  /** fn on the replica when that cannot hide a write of ctx's credential; on the primary otherwise, or when the replica fails. */
  async read<C extends BaseCtx, T>(ctx: C, fn: (ctx: C) => Promise<T>): Promise<T> {
    const onReplica = await this.replicaCtx(ctx);
    if (!onReplica) {
      this.stats.primary++;
      return fn(ctx);
    }
    try {
      const result = await fn(onReplica);
      this.stats.replica++;
      return result;
    } catch (err) {
      if (!replicaTrouble(err)) throw err;
      this.rest(err);
      this.stats.fallbacks++;
      return fn(ctx);
    }
  }

  /** Resolves once reads may go to the replica at all (LISTEN in place, floor known). */
  async ready(): Promise<void> {
    while (!this.listener.live) await once(this.listener, 'up');
    await this.ensureFloor();
  }

  /** Resolves once every fence NOTIFYed before the call has been applied. */
  sync(): Promise<void> {
    return this.listener.sync();
  }

  close(): Promise<void> {
    return this.listener.close();
  }

  private async replicaCtx<C extends BaseCtx>(ctx: C): Promise<C | null> {
    if (ctx.db.isTransaction || !this.listener.live || this.services.now() < this.restingUntil) return null;
    await turn(); // fences that already reached this process are applied first
    await this.ensureFloor();
    if (this.floor === null) return null;
    const own = ctx.actor.id === null ? undefined : this.fences.get(ctx.actor.id);
    const fence = [this.floor, this.collapsed, own ?? 0n].reduce((a, b) => (a > b ? a : b));
    if (this.replayed < fence) await this.sample();
    return this.replayed >= fence ? { ...ctx, db: this.replica } : null;
  }

  private fence(credentials: readonly string[], position: bigint): void {
    if (position <= this.replayed) return;
    for (const credential of credentials) {
      const known = this.fences.get(credential);
      if (known === undefined || known < position) this.fences.set(credential, position);
    }
    if (this.fences.size > MAX_FENCES) {
      for (const p of this.fences.values()) if (p > this.collapsed) this.collapsed = p;
      this.fences.clear();
    }
  }

  private ensureFloor(): Promise<void> {
    if (this.floor !== null || !this.listener.live) return Promise.resolve();
    const generation = this.generation;
    this.flooring ??= this.position(this.services.db, PRIMARY_POSITION)
      .then((position) => {
        // Taken after LISTEN was in place: every later write's fence reaches this process.
        if (generation === this.generation) this.floor = position;
      })
      .catch((err: unknown) => this.services.log.warn({ err }, 'could not read the primary WAL position: reads stay on the primary'))
      .finally(() => {
        this.flooring = null;
      });
    return this.flooring;
  }

  private sample(): Promise<void> {
    this.sampling ??= this.position(this.replica, REPLICA_POSITION)
      .then(
        (position) => {
          if (position > this.replayed) this.replayed = position;
          for (const [credential, fence] of this.fences) if (fence <= this.replayed) this.fences.delete(credential);
        },
        (err: unknown) => this.rest(err),
      )
      .finally(() => {
        this.sampling = null;
      });
    return this.sampling;
  }

  private async position(db: Db, expression: string): Promise<bigint> {
    const { rows } = (await db.raw(`select (${expression})::text as lsn`)) as { rows: { lsn: string | null }[] };
    return rows[0]?.lsn ? walPosition(rows[0].lsn) : 0n;
  }

  /** The replica failed: reads go to the primary for a while, then to the replica again once it answers. */
  private rest(err: unknown): void {
    if (this.services.now() >= this.restingUntil) this.services.log.warn({ err }, `the read replica failed: reads go to the primary for ${REPLICA_REST_MS} ms`);
    this.restingUntil = this.services.now() + REPLICA_REST_MS;
    // The fences forgotten so far were at most here: a replica that comes back (or another one at
    // this address) must reach it again.
    if (this.replayed > this.collapsed) this.collapsed = this.replayed;
    this.replayed = 0n;
  }
}

const routing = part(
  'readReplica.routing',
  (services) => (services.readDb ? new ReadRouting(services, services.readDb, Listener.forServices(services, [FENCES_CHANNEL]).start()) : null),
  (r) => r?.close(),
);

/** This process's routing of reads; null without a read replica. */
export function readRoutingOf(services: Services): ReadRouting | null {
  return services.get(routing);
}

/** fn on the replica when that cannot hide a write of ctx's credential; on the primary otherwise. Without a replica: fn(ctx). */
export function onReplica<C extends BaseCtx, T>(ctx: C, fn: (ctx: C) => Promise<T>): Promise<T> {
  const r = ctx.services.get(routing);
  return r ? r.read(ctx, fn) : fn(ctx);
}

/** With a read replica: every write request announces its credential's fence before its response leaves. */
export function installReadYourWrites(app: FastifyInstance, services: Services): void {
  const r = services.get(routing);
  if (!r) return;
  app.addHook('onSend', async (req, _reply, payload) => {
    const credential = req.ctx?.actor.id;
    if (credential && !SAFE_METHODS.has(req.method)) await r.wrote(credential).catch((err: unknown) => req.log.warn({ err }, 'could not announce a write to the read routing'));
    return payload;
  });
}
