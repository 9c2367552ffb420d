import t from 'tap';
import { batcher } from '../../server/core/batcher.js';

const tick = () => new Promise((r) => setImmediate(r));

/** A batcher whose runs wait for the test to release them; records each batch. */
function gated(opts: { maxSize: number; exclusive?: (item: string) => string | null }, fail?: (items: string[]) => boolean) {
  const batches: string[][] = [];
  const releases: (() => void)[] = [];
  const submit = batcher<string, string>(async (items) => {
    batches.push(items);
    await new Promise<void>((r) => releases.push(r));
    if (fail?.(items)) throw new Error(`boom ${items.join(',')}`);
    return items.map((i) => i.toUpperCase());
  }, opts);
  const releaseAll = async () => {
    while (releases.length) {
      releases.shift()!();
      await tick();
      await tick();
    }
  };
  return { submit, batches, releaseAll };
}

t.test('a lone call goes at once; calls arriving meanwhile go together as the next batch, in order', async (t) => {
  const { submit, batches, releaseAll } = gated({ maxSize: 10 });
  const first = submit('g', 'a');
  t.same(batches, [['a']], 'the first call runs alone, at once');
  const rest = ['b', 'c', 'd'].map((x) => submit('g', x));
  const other = submit('h', 'z');
  t.same(batches, [['a'], ['z']], 'another group does not wait');
  await releaseAll();
  t.same(batches, [['a'], ['z'], ['b', 'c', 'd']], 'the waiting calls went as one batch');
  t.same(await Promise.all([first, ...rest, other]), ['A', 'B', 'C', 'D', 'Z'], 'each call gets its own result');
});

t.test('a batch takes at most maxSize calls, and never two with the same exclusive value', async (t) => {
  const { submit, batches, releaseAll } = gated({ maxSize: 3, exclusive: (x) => (x.startsWith('k') ? x.slice(0, 2) : null) });
  const calls = ['x', 'k1a', 'k1b', 'k2', 'y', 'z', 'w'].map((x) => submit('g', x));
  await releaseAll();
  t.same(batches, [['x'], ['k1a', 'k2', 'y'], ['k1b', 'z', 'w']], 'k1b waits for the batch after k1a; three per batch');
  t.same(await Promise.all(calls), ['X', 'K1A', 'K1B', 'K2', 'Y', 'Z', 'W']);
});

t.test('a failing batch rejects its own calls only, and the next batch still runs', async (t) => {
  const { submit, batches, releaseAll } = gated({ maxSize: 10 }, (items) => items.includes('bad'));
  const first = submit('g', 'a');
  const failing = [submit('g', 'bad'), submit('g', 'b')];
  await tick();
  void releaseAll();
  await t.rejects(failing[0]!, /boom bad,b/);
  await t.rejects(failing[1]!, /boom bad,b/, 'every call of that batch');
  t.equal(await first, 'A');
  const later = submit('g', 'c');
  await releaseAll();
  t.equal(await later, 'C', 'the group works after a failure');
  t.same(batches, [['a'], ['bad', 'b'], ['c']]);
});
