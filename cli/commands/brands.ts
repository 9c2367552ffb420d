import { Option, type Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import { withServices } from '../database.js';
import { accountCtx, type Mode } from '../context.js';
import { emit, need, table, UsageError } from '../io.js';
import type { GlobalOptions } from '../globals.js';

const modeOption = () => new Option('--mode <mode>', 'live or test data').choices(['live', 'test']).default('live');

export function registerBrands(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('brands').description('brands (a.k.a. workspaces)');

  cmd
    .command('create')
    .description('create a brand')
    .option('--name <name>', 'brand name')
    .option('--slug <slug>', 'unique per account (default: from the name)')
    .option('--ticket-prefix <prefix>', 'ticket number prefix (default: from the name)')
    .option('--ticket-number-start <n>', 'first ticket number (default 1000)')
    .option('--account <id>', 'account id (default: the only account)')
    .addOption(modeOption())
    .option('--json', 'JSON output')
    .action(async (opts: { name?: string; slug?: string; ticketPrefix?: string; ticketNumberStart?: string; account?: string; mode: Mode; json?: boolean }) => {
      const name = await need(opts.name, '--name', 'Brand name');
      const start = opts.ticketNumberStart === undefined ? undefined : Number(opts.ticketNumberStart);
      if (start !== undefined && !(Number.isInteger(start) && start >= 1)) throw new UsageError('--ticket-number-start must be a positive integer');
      const { createBrand } = await import('../../server/flows/brands.js');
      const brand = await withServices(
        loadConfig({ configFile: globals().config }),
        async (services) => createBrand(await accountCtx(services, opts.account, opts.mode), { name, slug: opts.slug, ticketPrefix: opts.ticketPrefix, ticketNumberStart: start }),
        { migrate: true },
      );
      emit(Boolean(opts.json), brand, () => [
        `brand ${brand.id} "${brand.name}" (slug ${brand.slug}, ${opts.mode} mode, next ticket ${brand.ticketPrefix}-${brand.nextTicketNumber})`,
      ]);
    });

  cmd
    .command('list')
    .description('list brands of an account')
    .option('--account <id>', 'account id (default: the only account)')
    .addOption(modeOption())
    .option('--json', 'JSON output')
    .action(async (opts: { account?: string; mode: Mode; json?: boolean }) => {
      const brands = await import('../../server/domains/brands/service.js');
      const rows = await withServices(loadConfig({ configFile: globals().config }), async (services) => brands.list(await accountCtx(services, opts.account, opts.mode)), {
        migrate: true,
      });
      emit(Boolean(opts.json), rows, () => table(rows, ['id', 'name', 'slug', 'ticketPrefix', 'nextTicketNumber', 'createdAt']));
    });
}
