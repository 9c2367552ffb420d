import { Worker } from 'node:worker_threads';
import type { Config } from './core/config.js';
import type { Figures } from './core/metrics.js';
import type { ServiceLogger } from './core/services.js';

/** What the thread is given: it opens its own pool and builds its own services. */
export interface DispatcherThreadData {
  config: Config;
  databaseUrl: string;
  directUrl: string | null;
  poolMax: number;
  transactionPooling: boolean;
}

export type ToThread = { type: 'figures'; id: number } | { type: 'stop'; drainMs: number };

export type FromThread =
  | { type: 'started' }
  | { type: 'log'; level: keyof ServiceLogger; obj: object; msg: string }
  | { type: 'figures'; id: number; figures: Figures }
  | { type: 'stopped' };

/** A scrape does not wait longer than this for the thread's figures. */
const FIGURES_TIMEOUT_MS = 5_000;

/**
 * `--role all`'s dispatcher, on a thread of its own (dispatcher-thread-entry.ts): its claims,
 * deliveries and settles run on their own event loop and connections, so however busy the API's
 * loop is, they get their share of the process. Its lines go to the process's logger.
 */
export class DispatcherThread {
  private readonly asked = new Map<number, (figures: Figures) => void>();
  private nextId = 1;
  private readonly exited: Promise<void>;
  private stopped: (() => void) | null = null;
  private stopping = false;

  private constructor(
    private readonly worker: Worker,
    log: ServiceLogger,
    onFailure: (err: Error) => void,
  ) {
    worker.on('message', (m: FromThread) => {
      if (m.type === 'log') log[m.level](m.obj, m.msg);
      else if (m.type === 'figures') this.asked.get(m.id)?.(m.figures);
      else if (m.type === 'stopped') this.stopped?.();
    });
    // An uncaught error ends the thread ('error', then 'exit'): the process has lost its deliveries.
    let failed = false;
    const fail = (err: Error) => {
      if (!failed && !this.stopping) onFailure(err);
      failed = true;
    };
    worker.on('error', fail);
    this.exited = new Promise((resolve) =>
      worker.once('exit', (code) => {
        fail(new Error(`the dispatcher thread exited with ${code}`));
        resolve();
      }),
    );
  }

  /** Starts the thread; resolves once its dispatcher runs, rejects when it could not start. */
  static async start(data: DispatcherThreadData, log: ServiceLogger, onFailure: (err: Error) => void): Promise<DispatcherThread> {
    const worker = new Worker(new URL('./dispatcher-thread-entry.js', import.meta.url), { workerData: data });
    await new Promise<void>((resolve, reject) => {
      const started = (m: FromThread) => {
        if (m.type !== 'started') return;
        worker.off('message', started).off('error', reject);
        resolve();
      };
      worker.on('message', started).once('error', reject);
      worker.once('exit', (code) => reject(new Error(`the dispatcher thread exited with ${code} while starting`)));
    });
    return new DispatcherThread(worker, log, onFailure);
  }

  /** The thread's metrics, for this process's scrape. */
  figures(): Promise<Figures> {
    const id = this.nextId++;
    return new Promise<Figures>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.asked.delete(id);
        reject(new Error(`no answer within ${FIGURES_TIMEOUT_MS} ms`));
      }, FIGURES_TIMEOUT_MS);
      this.asked.set(id, (figures) => {
        clearTimeout(timer);
        this.asked.delete(id);
        resolve(figures);
      });
      this.worker.postMessage({ type: 'figures', id } satisfies ToThread);
    });
  }

  /** Drains the dispatcher (see Dispatcher.stop), closes its services and pool, and ends the thread. */
  async stop(drainMs: number): Promise<void> {
    this.stopping = true;
    const stopped = new Promise<void>((resolve) => (this.stopped = resolve));
    this.worker.postMessage({ type: 'stop', drainMs } satisfies ToThread);
    await Promise.race([stopped, this.exited]);
    await this.worker.terminate();
  }
}
