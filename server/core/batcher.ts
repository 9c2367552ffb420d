/**
 * Group commit: calls that arrive while a batch of their group is running wait, and go together
 * as the next batch, which `run` executes as ONE unit (ticket create: one statement, one commit).
 * A lone call goes at once, as a batch of one, so nothing waits unless something is running.
 *
 * - At most one batch per group runs at a time; a batch takes at most `maxSize` calls, oldest
 *   first.
 * - Calls with the same `exclusive` value (a key that one batch must not hold twice) go in
 *   separate batches, in arrival order.
 * - `run` returns one result per call, in order. When it throws, every call of that batch
 *   rejects with that error, and the next batch still runs.
 */

export function batcher<T, R>(run: (items: T[]) => Promise<R[]>, opts: { maxSize: number; exclusive?: (item: T) => string | null }) {
  interface Waiting { item: T; resolve: (r: R) => void; reject: (err: unknown) => void }
  const groups = new Map<string, { waiting: Waiting[]; running: boolean }>();

  async function drain(key: string, group: { waiting: Waiting[]; running: boolean }): Promise<void> {
    group.running = true;
    while (group.waiting.length) {
      const batch: Waiting[] = [];
      const taken = new Set<string>();
      const rest: Waiting[] = [];
      for (const w of group.waiting) {
        const exclusive = opts.exclusive?.(w.item) ?? null;
        if (batch.length >= opts.maxSize || (exclusive !== null && taken.has(exclusive))) {
          rest.push(w);
          continue;
        }
        if (exclusive !== null) taken.add(exclusive);
        batch.push(w);
      }
      group.waiting = rest;
      try {
        const results = await run(batch.map((w) => w.item));
        batch.forEach((w, i) => w.resolve(results[i]!));
      } catch (err) {
        for (const w of batch) w.reject(err);
      }
    }
    group.running = false;
    groups.delete(key);
  }

  return function submit(group: string, item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      let g = groups.get(group);
      if (!g) groups.set(group, g = { waiting: [], running: false });
      g.waiting.push({ item, resolve, reject });
      if (!g.running) void drain(group, g);
    });
  };
}
