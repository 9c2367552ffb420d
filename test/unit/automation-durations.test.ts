import t from 'tap';
import { ALWAYS_OPEN, BusinessHours } from '../../server/core/working-time.js';
import { candidateBounds, hoursOf, type Moments } from '../../server/domains/rules/durations.js';
import type { Conditions } from '../../server/domains/rules/schemas.js';

// Automations' durations: hours since (or until) a ticket's moments, in calendar and business
// hours, and the SQL bounds an automation's conditions put on those moments. A bound may let
// through tickets that do not match (the engine checks them), never leave out one that does.

const HOUR = 3_600_000;
const at = (iso: string) => Date.parse(iso);
const weekdays = new BusinessHours({ start: '09:00', end: '17:00', days: [1, 2, 3, 4, 5], timezone: 'UTC' });
const FRIDAY_4PM = at('2026-03-13T16:00:00Z');
const SATURDAY_NOON = at('2026-03-14T12:00:00Z');
const none: Moments = {
  hoursSinceCreated: null,
  hoursSinceUpdated: null,
  hoursSinceStatusChanged: null,
  hoursSinceResolved: null,
  hoursSinceCustomerMessage: null,
  hoursSinceAgentReply: null,
  hoursUntilDue: null,
};
// The schema types the wire's operator names loosely.
const all = (...conditions: Record<string, unknown>[]) => ({ all: conditions }) as unknown as Conditions;

t.test('hours since a moment, and until the due time, in calendar and business hours', async (t) => {
  const moments: Moments = { ...none, hoursSinceResolved: new Date(FRIDAY_4PM), hoursUntilDue: new Date(at('2026-03-16T11:00:00Z')) };
  const hours = hoursOf(moments, SATURDAY_NOON, weekdays);
  t.equal(hours('hoursSinceResolved', false), 20, 'Friday 16:00 to Saturday noon: 20 hours');
  t.equal(hours('hoursSinceResolved', true), 1, 'of which one within business hours');
  t.equal(hours('hoursUntilDue', false), 47, 'to Monday 11:00: 47 hours');
  t.equal(hours('hoursUntilDue', true), 2, 'of which two within business hours');
  t.equal(hours('hoursSinceAgentReply', false), null, 'no moment, no duration');
  const late = hoursOf(moments, at('2026-03-16T13:00:00Z'), weekdays);
  t.equal(late('hoursUntilDue', false), -2, 'past due: negative');
  t.equal(late('hoursUntilDue', true), -2);
  t.equal(hoursOf(moments, SATURDAY_NOON, ALWAYS_OPEN)('hoursSinceResolved', true), 20, 'a brand without business hours: every hour counts');
});

t.test('the bounds of durations: at least N hours bounds in calendar and business hours alike', async (t) => {
  const now = SATURDAY_NOON;
  t.same(candidateBounds(all({ field: 'hoursSinceUpdated', operator: 'gte', value: 24 }), now).bounds, [{ field: 'hoursSinceUpdated', op: '<=', at: now - 24 * HOUR }]);
  t.same(
    candidateBounds(all({ field: 'hoursSinceUpdated', operator: 'gt', value: 24, businessHours: true }), now).bounds,
    [{ field: 'hoursSinceUpdated', op: '<=', at: now - 24 * HOUR }],
    'business hours never exceed calendar hours',
  );
  t.same(candidateBounds(all({ field: 'hoursSinceUpdated', operator: 'lte', value: 2 }), now).bounds, [{ field: 'hoursSinceUpdated', op: '>=', at: now - 2 * HOUR }]);
  t.same(
    candidateBounds(all({ field: 'hoursSinceUpdated', operator: 'lte', value: 2, businessHours: true }), now).bounds,
    [{ field: 'hoursSinceUpdated', op: 'known' }],
    'at most N business hours may be any number of calendar hours (a weekend)',
  );
  t.same(candidateBounds(all({ field: 'hoursUntilDue', operator: 'lte', value: 2 }), now).bounds, [{ field: 'hoursUntilDue', op: '<=', at: now + 2 * HOUR }]);
  t.same(candidateBounds(all({ field: 'hoursUntilDue', operator: 'lte', value: 2, businessHours: true }), now).bounds, [{ field: 'hoursUntilDue', op: 'known' }]);
  t.same(
    candidateBounds(all({ field: 'hoursUntilDue', operator: 'lte', value: -1, businessHours: true }), now).bounds,
    [{ field: 'hoursUntilDue', op: '<=', at: now - HOUR }],
    'an hour past due in business hours is at least an hour past in calendar hours',
  );
  t.same(candidateBounds(all({ field: 'hoursSinceCreated', operator: 'is', value: 3 }), now).bounds, [], 'an exact number bounds nothing');
  t.same(candidateBounds(all({ field: 'hoursSinceCreated', operator: 'present' }), now).bounds, [{ field: 'hoursSinceCreated', op: 'known' }]);
  t.same(candidateBounds({ any: [{ field: 'hoursSinceCreated', operator: 'gte', value: 1 }] } as unknown as Conditions, now).bounds, [], 'any: no bound');
});

t.test('the statuses an automation can match', async (t) => {
  const now = SATURDAY_NOON;
  t.same(candidateBounds(all(), now), { statuses: null, excluded: [], bounds: [] });
  t.same(candidateBounds(all({ field: 'status', operator: 'is', value: 'Open' }), now).statuses, ['open'], 'case as the engine folds it');
  t.same(candidateBounds(all({ field: 'status', operator: 'in', value: ['open', 'pending'] }, { field: 'status', operator: 'is', value: 'pending' }), now).statuses, ['pending']);
  t.same(candidateBounds(all({ field: 'status', operator: 'not_in', value: ['pending'] }), now).excluded, ['pending']);
  t.same(
    candidateBounds(all({ field: 'hoursSinceResolved', operator: 'gte', value: 96 }), now).statuses,
    ['resolved'],
    'only a resolved ticket that is not closed has resolved_at',
  );
  t.same(candidateBounds(all({ field: 'status', operator: 'is', value: 'open' }, { field: 'hoursSinceResolved', operator: 'gte', value: 1 }), now).statuses, [], 'none can');
});
