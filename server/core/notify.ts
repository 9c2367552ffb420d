import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { BaseCtx } from './context.js';
import type { Db } from './db.js';
import type { Services } from './services.js';

/**
 * PostgreSQL LISTEN on one dedicated connection (outside the knex pool, which hands connections to
 * whoever asks). NOTIFY is delivered at commit to every listening session of the database, so
 * processes learn about each other's committed changes without polling.
 *
 * Events: 'up' once LISTEN is in place (again), 'down' when the connection is lost (notifications
 * sent meanwhile are lost: a consumer must assume anything changed), 'notification' (channel, payload).
 * A lost connection is re-opened with a backoff until close().
 *
 * holdLocks: session advisory locks (`pg_advisory_lock(hashtext(name))`) this connection holds while
 * it is up, 'up' coming only once they are held, so other processes can tell that this one lives:
 * PostgreSQL frees them when the session ends, however the process died. A session lock needs a
 * direct connection (like LISTEN), never one shared through a transaction-mode pooler.
 */
export class Listener extends EventEmitter {
  private client: pg.Client | null = null;
  private closed = false;
  private retryMs = 0;
  private timer: NodeJS.Timeout | null = null;
  live = false;

  constructor(
    private readonly connection: pg.ClientConfig,
    private readonly channels: readonly string[],
    private readonly holdLocks: readonly string[] = [],
  ) {
    super();
  }

  /**
   * A listener on the services' database: on its direct URL when one is configured, since a
   * pooler in transaction mode would hand the LISTEN session to other clients between statements
   * (and drop the notifications), else on the pool's own connection settings.
   */
  static forServices(services: Services, channels: readonly string[], holdLocks: readonly string[] = []): Listener {
    const config = (services.db.client as { config: { connection?: unknown } }).config.connection;
    const connection: pg.ClientConfig = services.directUrl
      ? { connectionString: services.directUrl }
      : typeof config === 'string'
        ? { connectionString: config }
        : { ...(config as pg.ClientConfig) };
    return new Listener({ ...connection, application_name: 'ticketd-listen' }, channels, holdLocks);
  }

  start(): this {
    void this.connect();
    return this;
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client(this.connection);
    this.client = client;
    let failed = false;
    const lost = () => {
      if (failed) return;
      failed = true;
      client.removeAllListeners('notification');
      client.end().catch(() => undefined);
      if (this.client === client) this.client = null;
      if (this.live) {
        this.live = false;
        this.emit('down');
      }
      this.retry();
    };
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', (n) => this.emit('notification', n.channel, n.payload ?? ''));
    try {
      await client.connect();
      for (const channel of this.channels) await client.query(`LISTEN "${channel.replace(/"/g, '""')}"`);
      for (const name of this.holdLocks) {
        // Refused while the server still keeps our previous session (a connection cut it has not noticed yet): retried.
        const { rows } = await client.query<{ held: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS held', [name]);
        if (!rows[0]?.held) throw new Error(`advisory lock ${name} is held by another session`);
      }
    } catch {
      lost();
      return;
    }
    if (this.closed || failed) return;
    this.retryMs = 0;
    this.live = true;
    this.emit('up');
  }

  private retry(): void {
    if (this.closed || this.timer) return;
    this.retryMs = Math.min(this.retryMs ? this.retryMs * 2 : 50, 5_000);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.connect();
    }, this.retryMs);
    this.timer.unref();
  }

  /** One round trip on the listening connection: every notification committed before this call has been emitted when it resolves. */
  async sync(): Promise<void> {
    if (this.client && this.live) await this.client.query('SELECT 1');
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const client = this.client;
    this.client = null;
    this.live = false;
    if (client) {
      client.removeAllListeners('end');
      client.removeAllListeners('notification');
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
    }
  }
}

/** NOTIFY inside the caller's transaction: delivered when (and only if) it commits. */
export async function notify(db: Db, channel: string, payloads: readonly string[]): Promise<void> {
  if (payloads.length) await db.raw('SELECT pg_notify(?, p) FROM unnest(?::text[]) AS p', [channel, [...payloads]]);
}

/**
 * NOTIFY when the transaction ctx is in commits, never if it rolls back. Inside withTx the
 * notifications are gathered and sent by one statement just before its commit (however many
 * changes asked, and each payload once); in another transaction, now on its connection (delivered
 * at its commit); outside any, now (the change it announces has committed).
 */
export async function notifyAtCommit(ctx: BaseCtx, channel: string, payloads: readonly string[]): Promise<void> {
  if (!payloads.length) return;
  if (!ctx.txNotify || !ctx.db.isTransaction) return notify(ctx.db, channel, payloads);
  const queued = ctx.txNotify.get(channel) ?? new Set<string>();
  for (const p of payloads) queued.add(p);
  ctx.txNotify.set(channel, queued);
}
