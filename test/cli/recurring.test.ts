import t from 'tap';
import { buildApp } from '../../server/app.js';
import { mustCreate, ownerWithBrand, testConfig } from '../helpers/app.js';
import { runCli } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { testNow } from '../helpers/clock.js';

// `ticketd recurring list|run`, through the real binary: an operator sees a brand's schedules and
// opens one's ticket now. Four spawns in all.
const { url, db } = await freshDatabase(t);
const env = { DATABASE_URL: url };
const app = await buildApp({ clock: testNow, config: testConfig(env), db });
t.teardown(() => app.close());

t.test('recurring list and run: the schedules, then a ticket now with the schedule left as it was', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const weekly = await mustCreate(owner.live, `${base}/recurring-tickets`, {
    title: 'Weekly backup check',
    schedule: { frequency: 'weekly', dayOfWeek: 1, timeOfDay: '09:00', timezone: 'Europe/Paris', skipWeekends: true },
  });
  const cron = await mustCreate(owner.live, `${base}/recurring-tickets`, { title: 'Standup notes', cronExpr: '30 9 * * 1-5', timezone: 'UTC', enabled: false });

  const listed = await runCli(['recurring', 'list', brand.id], env);
  t.equal(listed.code, 0, { stderr: listed.stderr });
  t.match(listed.stdout, new RegExp(`${weekly.id}\\s+Weekly backup check\\s+weekly Mon 09:00 \\(weekdays\\)\\s+Europe/Paris\\s+active\\s+${weekly.nextRunAt}\\s+0\\s+0`));
  t.match(listed.stdout, new RegExp(`${cron.id}\\s+Standup notes\\s+cron 30 9 \\* \\* 1-5\\s+UTC\\s+paused`));

  const paused = await runCli(['recurring', 'list', `ws_${brand.id.slice(3)}`, '--status', 'paused', '--json'], env);
  t.equal(paused.code, 0, { stderr: paused.stderr });
  t.match(paused.json(), { data: [{ id: cron.id, enabled: false }], total: 1 }, 'the API’s { data, total }; a ws_ id works too');

  const run = await runCli(['recurring', 'run', brand.id, weekly.id, '--json'], env);
  t.equal(run.code, 0, { stderr: run.stderr });
  const ticket = run.json();
  t.match(ticket, { object: 'ticket', brandId: brand.id, title: 'Weekly backup check', createdBy: `recurring:${weekly.id}`, sourceId: weekly.id });
  t.match(await db('recurringTickets').where({ id: weekly.id }).first(), { runCount: 1, lastTicketId: ticket.id, nextRunAt: new Date(weekly.nextRunAt) });

  const unknown = await runCli(['recurring', 'run', brand.id, 'rec_00000000000000000000000000'], env);
  t.equal(unknown.code, 1, 'an unknown one fails');
  t.match(unknown.stderr, /Recurring ticket not found/);
  t.equal((await db('tickets').where({ brandId: brand.id })).length, 1, 'one ticket in all');
});
