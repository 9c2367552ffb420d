/**
 * Open-loop load for the soak: requests go out on a timetable whether or not earlier ones were
 * answered, and each latency counts from the request's slot in the timetable, so a server that
 * falls behind shows it instead of slowing the load down (no coordinated omission).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';

export type Op = 'create' | 'comment' | 'list' | 'search' | 'dashboard';

export interface Sample {
  /** Seconds from the start of the load to the request's slot. */
  at: number;
  op: Op;
  ms: number;
  ok: boolean;
}

/** A server that stops answering must not pile up requests without bound: past this, slots are skipped and counted as errors. */
const MAX_IN_FLIGHT = 256;
const REQUEST_TIMEOUT_MS = 30_000;

/** Calls fire(i, due) `count` times, `everyMs` apart from `t0` (performance.now() time); late slots fire at once. */
export async function timetable(t0: number, everyMs: number, count: number, fire: (i: number, due: number) => void | Promise<void>): Promise<void> {
  for (let i = 0; i < count; i++) {
    const due = t0 + i * everyMs;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    await fire(i, due);
  }
}

/** Requests to the server, each recorded as a sample of its operation from its slot to its answer; errors counted by kind. */
export class Client {
  readonly samples: Sample[] = [];
  readonly errors = new Map<string, number>();
  /** When the load started (performance.now() time): samples are timed from here. */
  startedAt = 0;
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly pool: Pool;

  constructor(url: string) {
    this.pool = new Pool(url, { connections: 32, headersTimeout: REQUEST_TIMEOUT_MS, bodyTimeout: REQUEST_TIMEOUT_MS });
  }

  start(): number {
    return (this.startedAt = performance.now());
  }

  /** The answer's JSON on 2xx, else undefined (and an error counted). `op` null: setup, not recorded, and a failure throws. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  send(op: Op | null, due: number, method: 'GET' | 'POST', route: string, headers: Record<string, string>, body?: unknown): Promise<any> {
    // Errors are named by the route's shape, not its ids.
    const shape = `${method} ${route.split('?')[0]!.replace(/\/[a-z]+_[A-Za-z0-9]+/g, '/:id')}`;
    const record = (error?: string) => {
      if (!op) {
        if (error) throw new Error(`setup: ${error}`);
        return;
      }
      this.samples.push({ at: (due - this.startedAt) / 1000, op, ms: performance.now() - due, ok: !error });
      if (error) this.errors.set(error, (this.errors.get(error) ?? 0) + 1);
    };
    if (this.inFlight.size >= MAX_IN_FLIGHT) {
      record(`${shape}: skipped, ${MAX_IN_FLIGHT} requests in flight`);
      return Promise.resolve(undefined);
    }
    const request = (async () => {
      let status = 0;
      let json;
      try {
        const res = await this.pool.request({
          method,
          path: route,
          headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        status = res.statusCode;
        const raw = await res.body.text();
        json = raw ? JSON.parse(raw) : undefined;
      } catch (err) {
        record(`${shape}: ${(err as { code?: string }).code ?? (err as Error).message}`);
        return undefined;
      }
      record(status < 300 ? undefined : `${shape}: ${status} ${json?.code ?? ''}`);
      return status < 300 ? json : undefined;
    })();
    this.inFlight.add(request);
    const done = () => this.inFlight.delete(request);
    request.then(done, done);
    return request;
  }

  /** Waits for the requests in flight (each ends by its timeout at the latest). */
  async settle(): Promise<void> {
    await Promise.allSettled([...this.inFlight]);
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
