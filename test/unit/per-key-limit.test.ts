import t from 'tap';
import { perKeyLimit } from '../../server/core/per-key-limit.js';

const tick = () => new Promise((r) => setImmediate(r));

t.test('at most `limit` calls run at once per key, the rest in arrival order; other keys do not wait', async (t) => {
  const run = perKeyLimit(2);
  const running = new Map<string, number>();
  let most = 0;
  const order: number[] = [];
  const releases: (() => void)[] = [];
  const call = (key: string, n: number) => run(key, async () => {
    running.set(key, (running.get(key) ?? 0) + 1);
    most = Math.max(most, running.get('brand') ?? 0);
    order.push(n);
    await new Promise<void>((r) => releases.push(r));
    running.set(key, running.get(key)! - 1);
    return n;
  });
  const calls = [1, 2, 3, 4, 5].map((n) => call('brand', n));
  const other = call('other', 99);
  await tick();
  t.same(order, [1, 2, 99], 'two of the brand start, the other key starts at once');
  while (releases.length) {
    releases.shift()!();
    await tick();
    await tick();
  }
  t.same(await Promise.all(calls), [1, 2, 3, 4, 5], 'every call gets its own result');
  t.equal(await other, 99);
  t.same(order.filter((n) => n !== 99), [1, 2, 3, 4, 5], 'waiting calls start in arrival order');
  t.equal(most, 2, 'never more than two at once');
});

t.test('a failing call frees its slot and its error reaches its caller only', async (t) => {
  const run = perKeyLimit(1);
  const failing = run('k', async () => { throw new Error('boom'); });
  const next = run('k', async () => 'ran');
  await t.rejects(failing, /boom/);
  t.equal(await next, 'ran', 'the next call ran after the failure');
  t.equal(await run('k', async () => 'again'), 'again', 'and the key is free again');
});
