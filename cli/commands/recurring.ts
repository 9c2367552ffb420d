import { Option, type Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import type { RecurringTicketView } from '../../server/domains/recurring-tickets/schemas.js';
import { withServices } from '../database.js';
import { brandCtx } from '../context.js';
import { emit, table } from '../io.js';
import type { GlobalOptions } from '../globals.js';

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];

/** When it runs, in a few words: `weekly Mon 09:00`, `monthly 31 17:30`, `cron 0 9 * * 1-5`. */
function ruleText(r: RecurringTicketView): string {
  const s = r.schedule;
  if (!s) return `cron ${r.cronExpr}`;
  const day = s.frequency === 'weekly' ? DAYS[s.dayOfWeek!] : s.frequency === 'monthly' ? String(s.dayOfMonth) : s.frequency === 'yearly' ? `${s.month}/${s.dayOfMonth}` : '';
  return [s.frequency, day, s.timeOfDay, s.skipWeekends ? '(weekdays)' : ''].filter(Boolean).join(' ');
}

export function registerRecurring(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('recurring').description("a brand's recurring tickets: what they open, when, and how their runs went");
  const config = () => loadConfig({ configFile: globals().config });

  cmd
    .command('list <brandId>')
    .description('the brand’s recurring tickets, the next due first (at most 100; --json gives the total too)')
    .addOption(new Option('--status <status>', 'active: enabled; paused: not').choices(['all', 'active', 'paused']).default('all'))
    .option('--json', 'JSON output: { data, total }, as GET /v1/brands/{brandId}/recurring-tickets')
    .action(async (brandId: string, opts: { status: 'all' | 'active' | 'paused'; json?: boolean }) => {
      const recurring = await import('../../server/domains/recurring-tickets/service.js');
      const page = await withServices(config(), async (services) => recurring.list(await brandCtx(services, brandId), brandId, { status: opts.status }), { migrate: true });
      const rows = page.data.map((r) => ({ ...r, rule: ruleText(r), status: r.enabled ? 'active' : 'paused' }));
      emit(Boolean(opts.json), page, () => [
        ...table(rows, ['id', 'title', 'rule', 'timezone', 'status', 'nextRunAt', 'runCount', 'failCount', 'lastError']),
        ...(page.total > rows.length ? [`(${rows.length} of ${page.total}: see --json or the API's limit and offset)`] : []),
      ]);
    });

  cmd
    .command('run <brandId> <recurringId>')
    .description('open its ticket now, as POST …/recurring-tickets/{id}/run does: its schedule stays; it counts as a run')
    .option('--json', 'JSON output: the ticket')
    .action(async (brandId: string, recurringId: string, opts: { json?: boolean }) => {
      const { runNow } = await import('../../server/flows/recurring-tickets.js');
      const ticket = await withServices(config(), async (services) => runNow(await brandCtx(services, brandId), brandId, recurringId), { migrate: true });
      emit(Boolean(opts.json), ticket, () => [`ticket ${ticket.id} #${ticket.ticketNumber} "${ticket.title}" opened from ${recurringId}`]);
    });
}
