import t from 'tap';
import { ZendeskPacer } from '../../server/integrations/import-zendesk-source.js';

/** A clock that moves only when told to, or when the pacer waits (by the wait). */
function fakeClock(start: number) {
  let now = start;
  const waits: number[] = [];
  return {
    now: () => now,
    sleep: async (ms: number) => {
      waits.push(ms);
      now += ms;
    },
    advance: (ms: number) => (now += ms),
    waits,
  };
}
const users = 'https://acme.zendesk.com/api/v2/users.json';
const exported = 'https://acme.zendesk.com/api/v2/incremental/tickets/cursor.json';

t.test('at most N requests in any minute: the next waits until the first is a minute old', async (t) => {
  // The last minute of a leap day: nothing here is by calendar.
  const clock = fakeClock(Date.UTC(2028, 1, 29, 23, 59, 30));
  const told: { reason: string; waitMs: number }[] = [];
  const pacer = new ZendeskPacer(3, (i) => told.push(i), clock);
  for (const step of [0, 10_000, 10_000]) {
    clock.advance(step);
    await pacer.before(users);
  }
  t.same(clock.waits, [], 'three in 20 s: none waits');
  await pacer.before(users);
  t.same(clock.waits, [40_000], 'the fourth waits 40 s');
  t.match(told, [{ reason: /reached 3 requests this minute/, waitMs: 40_000 }], 'and says why');
  await pacer.before(users);
  t.same(clock.waits, [40_000, 10_000], 'the fifth, until the second is a minute old');
});

t.test('the incremental export at most 10 a minute, counted apart from the other requests', async (t) => {
  const clock = fakeClock(Date.UTC(2026, 11, 31, 23, 59, 59));
  const pacer = new ZendeskPacer(200, undefined, clock);
  for (let i = 0; i < 10; i++) await pacer.before(exported);
  for (let i = 0; i < 50; i++) await pacer.before(users);
  t.same(clock.waits, [], 'ten exports and fifty others at once: none waits');
  await pacer.before(exported);
  t.same(clock.waits, [60_000], 'the eleventh export waits a minute');
});

t.test("a budget nearly spent (at most a tenth left) pauses every request until Zendesk's reset", async (t) => {
  const clock = fakeClock(Date.UTC(2026, 2, 29, 0, 59, 0));
  const pacer = new ZendeskPacer(200, undefined, clock);
  await pacer.before(users);
  pacer.after(users, { 'ratelimit-limit': '700', 'ratelimit-remaining': '71', 'ratelimit-reset': '12' });
  await pacer.before(users);
  t.same(clock.waits, [], '71 of 700 left: no pause');
  pacer.after(users, { 'x-rate-limit': '700', 'x-rate-limit-remaining': '70' });
  await pacer.before(exported);
  t.same(clock.waits, [60_000], '70 left (the older headers, no reset given): a minute');
  pacer.after(users, { 'ratelimit-limit': '700', 'ratelimit-remaining': '3', 'ratelimit-reset': '12' });
  await pacer.before(users);
  t.same(clock.waits, [60_000, 12_000], 'with a reset: until it');
});
