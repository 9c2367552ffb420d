/**
 * At most `limit` calls of fn run at once per key; the rest wait in arrival order. Ticket create
 * runs its statement through one per brand: creates in a brand are serialized by the brand row
 * lock anyway, so a burst of them waits here instead of holding pool connections (and database
 * backends, which slow the lock holder down on a small machine) while queued on that lock.
 */
export function perKeyLimit(limit: number) {
  const lanes = new Map<string, { running: number; waiting: (() => void)[] }>();
  return async function run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    let lane = lanes.get(key);
    if (!lane) lanes.set(key, lane = { running: 0, waiting: [] });
    if (lane.running < limit) lane.running++;
    else await new Promise<void>((resolve) => lane!.waiting.push(resolve)); // the finishing call hands its slot over
    try {
      return await fn();
    } finally {
      const next = lane.waiting.shift();
      if (next) next();
      else if (--lane.running === 0) lanes.delete(key);
    }
  };
}
