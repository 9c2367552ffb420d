/**
 * Group commit: calls that arrive while a batch of their group is running wait, and go together
 * as a later batch, which `run` executes as ONE unit (ticket create: one statement, one commit).
 * A lone call goes at once, as a batch of one, so nothing waits unless something is running.
 *
 * - At most `concurrency` batches per group run at a time (default 1); a batch takes at most
 *   `maxSize` calls, oldest first.
 * - Beside a running batch, another starts only when it would be at least as large as the
 *   largest running one; smaller, it waits for a batch to finish. Batches stay large (their
 *   fixed cost is what batching saves) and even, instead of the first call to arrive after a
 *   batch ends taking a free slot alone.
 * - Calls with the same `exclusive` value (a key that one batch must not hold twice, nor two
 *   running batches) never run at the same time: a later one waits for a batch without it.
 * - Calls with the same `affinity` value may share a batch, but not run in two at once: they
 *   would only wait on each other (ticket create: the brand's row lock), so they wait here.
 * - `run` returns one result per call, in order. When it throws, every call of that batch
 *   rejects with that error, and the next batch still runs.
 */

export interface BatcherOptions<T> {
  maxSize: number;
  concurrency?: number;
  exclusive?: (item: T) => string | null;
  affinity?: (item: T) => string | null;
}

export function batcher<T, R>(run: (items: T[]) => Promise<R[]>, opts: BatcherOptions<T>) {
  interface Waiting {
    item: T;
    exclusive: string | null;
    affinity: string | null;
    resolve: (r: R) => void;
    reject: (err: unknown) => void;
  }
  interface Running {
    size: number;
    exclusives: string[];
    affinities: string[];
  }
  interface Group {
    waiting: Waiting[];
    running: Set<Running>;
  }
  const concurrency = opts.concurrency ?? 1;
  const groups = new Map<string, Group>();

  /** The oldest waiting calls that may run now: no exclusive or affinity value of a running batch, no exclusive value twice. */
  function eligible(group: Group): Waiting[] {
    const held = new Set<string>();
    const busy = new Set<string>();
    for (const r of group.running) {
      for (const e of r.exclusives) held.add(e);
      for (const a of r.affinities) busy.add(a);
    }
    const batch: Waiting[] = [];
    for (const w of group.waiting) {
      if (batch.length >= opts.maxSize) break;
      if ((w.exclusive !== null && held.has(w.exclusive)) || (w.affinity !== null && busy.has(w.affinity))) continue;
      if (w.exclusive !== null) held.add(w.exclusive);
      batch.push(w);
    }
    return batch;
  }

  function launch(key: string, group: Group): void {
    while (group.running.size < concurrency) {
      const batch = eligible(group);
      const largestRunning = Math.max(0, ...[...group.running].map((r) => r.size));
      if (!batch.length || batch.length < largestRunning) break;
      const taken = new Set(batch);
      group.waiting = group.waiting.filter((w) => !taken.has(w));
      const running: Running = {
        size: batch.length,
        exclusives: batch.flatMap((w) => (w.exclusive === null ? [] : [w.exclusive])),
        affinities: [...new Set(batch.flatMap((w) => (w.affinity === null ? [] : [w.affinity])))],
      };
      group.running.add(running);
      void run(batch.map((w) => w.item))
        .then(
          (results) => batch.forEach((w, i) => w.resolve(results[i]!)),
          (err) => {
            for (const w of batch) w.reject(err);
          },
        )
        .finally(() => {
          group.running.delete(running);
          if (!group.running.size && !group.waiting.length) groups.delete(key);
          else launch(key, group);
        });
    }
  }

  return function submit(key: string, item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      let group = groups.get(key);
      if (!group) groups.set(key, (group = { waiting: [], running: new Set() }));
      group.waiting.push({ item, exclusive: opts.exclusive?.(item) ?? null, affinity: opts.affinity?.(item) ?? null, resolve, reject });
      launch(key, group);
    });
  };
}
