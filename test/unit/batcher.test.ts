import t from 'tap';
import { batcher, type BatcherOptions } from '../../server/core/batcher.js';

const tick = () => new Promise((r) => setImmediate(r));

/** A batcher whose runs wait for the test to release them; records each batch. */
function gated(opts: BatcherOptions<string>, fail?: (items: string[]) => boolean) {
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
  /** Lets the oldest running batch finish. */
  const releaseOne = async () => {
    releases.shift()!();
    await tick();
    await tick();
  };
  return { submit, batches, releaseAll, releaseOne };
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

t.test('with concurrency 2: a second batch runs beside the first when it is at least as large; an exclusive value held by a running batch waits', async (t) => {
  const { submit, batches, releaseOne, releaseAll } = gated({ maxSize: 10, concurrency: 2, exclusive: (x) => (x.startsWith('k') ? x.slice(0, 2) : null) });
  const calls = [submit('g', 'k1a'), submit('g', 'b')];
  t.same(batches, [['k1a'], ['b']], 'two lone calls both go at once');
  calls.push(...['k1b', 'c', 'd'].map((x) => submit('g', x)));
  t.equal(batches.length, 2, 'a third waits while two run');
  await releaseOne(); // k1a's batch ends while b's still runs
  t.same(batches[2], ['k1b', 'c', 'd'], 'the next batch takes every waiting call, k1b included now that k1a is done');
  calls.push(submit('g', 'e'));
  await releaseOne(); // b's batch ends; k1b's (3 calls) still runs
  t.equal(batches.length, 3, 'one waiting call does not start a batch beside a running batch of three');
  calls.push(submit('g', 'k1c'), submit('g', 'f'));
  t.equal(batches.length, 3, 'nor do three when one of them (k1c) must wait for k1b');
  calls.push(submit('g', 'h'));
  t.same(batches[3], ['e', 'f', 'h'], 'three eligible calls do, k1c left waiting');
  await releaseAll();
  t.same(batches[4], ['k1c'], 'k1c goes once k1b is done');
  t.same(await Promise.all(calls), ['K1A', 'B', 'K1B', 'C', 'D', 'E', 'K1C', 'F', 'H']);
});

t.test('calls of one affinity share a batch but never run in two at once', async (t) => {
  const { submit, batches, releaseOne, releaseAll } = gated({ maxSize: 10, concurrency: 2, affinity: (x) => x[0]! });
  const calls = [submit('g', 'a1')];
  calls.push(submit('g', 'a2'), submit('g', 'a3'));
  t.same(batches, [['a1']], "a2 and a3 wait for a1's batch instead of running beside it");
  calls.push(submit('g', 'b1'));
  t.same(batches, [['a1'], ['b1']], 'another affinity runs beside it');
  await releaseOne();
  t.same(batches[2], ['a2', 'a3'], 'then a2 and a3 go together');
  await releaseAll();
  t.same(await Promise.all(calls), ['A1', 'A2', 'A3', 'B1']);
});
