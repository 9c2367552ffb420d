import { Option, type Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import { OUTBOX_STATUSES, type OutboxStatus } from '../../server/core/outbox/statuses.js';
import { withServices } from '../database.js';
import { adminCtx } from '../context.js';
import { confirmOrFlag, emit, table, UsageError } from '../io.js';
import type { GlobalOptions } from '../globals.js';

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3600_000, d: 86_400_000 };

/** "30d", "12h", "90m", "45s" in milliseconds. */
export function parseDuration(text: string, flag: string): number {
  const match = /^(\d+)([smhd])$/.exec(text.trim());
  if (!match) throw new UsageError(`${flag} takes a duration such as 30d, 12h, 90m or 45s`);
  return Number(match[1]) * UNITS[match[2]!]!;
}

export function parseLimit(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > 1000) throw new UsageError('--limit must be a whole number from 1 to 1000');
  return n;
}

export function registerOutbox(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('outbox').description('messages waiting for delivery, delivered and failed (webhooks and mail; every account)');
  const config = () => loadConfig({ configFile: globals().config });
  const service = () => import('../../server/core/outbox/service.js');

  cmd
    .command('stats')
    .description('message counts by kind and status, and the age of the oldest one still to deliver')
    .option('--json', 'JSON output')
    .action(async (opts: { json?: boolean }) => {
      const outbox = await service();
      const stats = await withServices(config(), (services) => outbox.stats(adminCtx(services)), { migrate: true });
      emit(Boolean(opts.json), stats, () => [
        ...table(stats.counts, ['kind', 'status', 'count']),
        `oldest pending: ${stats.oldestPendingAgeSeconds === null ? 'none' : `${stats.oldestPendingAgeSeconds} s old`}`,
      ]);
    });

  cmd
    .command('list')
    .description('messages, newest first')
    .addOption(new Option('--status <status>', 'only messages in this state').choices([...OUTBOX_STATUSES]))
    .option('--limit <n>', 'how many (1-1000)', '50')
    .option('--json', 'JSON output')
    .action(async (opts: { status?: OutboxStatus; limit: string; json?: boolean }) => {
      const limit = parseLimit(opts.limit);
      const outbox = await service();
      const rows = await withServices(config(), (services) => outbox.listAll(adminCtx(services), { status: opts.status, limit }), { migrate: true });
      emit(Boolean(opts.json), rows, () =>
        table(rows as unknown as Record<string, unknown>[], ['id', 'kind', 'event', 'status', 'attempts', 'nextAttemptAt', 'lastError', 'createdAt']),
      );
    });

  cmd
    .command('retry <id>')
    .description('send a failed or dead message again: back to pending, due now, with a fresh set of attempts')
    .option('--json', 'JSON output')
    .action(async (id: string, opts: { json?: boolean }) => {
      const outbox = await service();
      const row = await withServices(config(), (services) => outbox.retry(adminCtx(services), id), { migrate: true });
      emit(Boolean(opts.json), row, () => [`${row.id} is pending again; a running dispatcher sends it now`]);
    });

  cmd
    .command('purge')
    .description('delete finished messages (delivered, failed, dead) older than a duration; pending ones are never purged')
    .requiredOption('--older-than <duration>', 'age such as 30d, 12h, 90m')
    .option('--yes', 'do not ask for confirmation')
    .option('--json', 'JSON output')
    .action(async (opts: { olderThan: string; yes?: boolean; json?: boolean }) => {
      const ms = parseDuration(opts.olderThan, '--older-than');
      if (!(await confirmOrFlag(opts.yes, `Delete finished outbox messages older than ${opts.olderThan}? Their delivery logs go with them.`))) return;
      const outbox = await service();
      const purged = await withServices(config(), (services) => outbox.purge(adminCtx(services), new Date(services.now() - ms)), { migrate: true });
      emit(Boolean(opts.json), { purged }, () => [`purged ${purged} message${purged === 1 ? '' : 's'}`]);
    });
}
