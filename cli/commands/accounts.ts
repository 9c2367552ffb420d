import { Option, type Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import type { CreatedAccountView } from '../../server/domains/accounts/schemas.js';
import { withServices } from '../database.js';
import { adminCtx } from '../context.js';
import { emit, need, table } from '../io.js';
import type { GlobalOptions } from '../globals.js';
import { registerAccountPlan } from './plans.js';

export function describeCreated(result: CreatedAccountView): string[] {
  return [
    `account ${result.account.id} "${result.account.name}", owner ${result.owner.email} (${result.owner.id})`,
    ...(result.brand ? [`brand ${result.brand.id} "${result.brand.name}" (${result.brand.livemode ? 'live' : 'test'} mode, slug ${result.brand.slug})`] : []),
    'API keys, shown this once:',
    `  live: ${result.apiKeys.live.key}`,
    `  test: ${result.apiKeys.test.key}`,
  ];
}

export function registerAccounts(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('accounts').description('accounts (tenants)');

  cmd
    .command('create')
    .description('create an account with its owner, a live and a test key, and optionally a first brand')
    .option('--email <email>', "owner's email")
    .option('--name <name>', "owner's name")
    .option('--account-name <name>', 'account name (default: owner name or email)')
    .option('--brand <name>', 'also create a brand with this name')
    .option('--brand-slug <slug>', 'slug of that brand')
    .addOption(new Option('--brand-mode <mode>', 'mode of that brand').choices(['live', 'test']).default('live'))
    .option('--json', 'JSON output')
    .action(async (opts: { email?: string; name?: string; accountName?: string; brand?: string; brandSlug?: string; brandMode: 'live' | 'test'; json?: boolean }) => {
      const email = await need(opts.email, '--email', "Owner's email");
      const brand = opts.brand ? { name: opts.brand, slug: opts.brandSlug, livemode: opts.brandMode === 'live' } : undefined;
      const { createAccount } = await import('../../server/flows/accounts.js');
      const result = await withServices(
        loadConfig({ configFile: globals().config }),
        (services) => createAccount(adminCtx(services), { email, name: opts.name, accountName: opts.accountName }, brand),
        { migrate: true },
      );
      emit(Boolean(opts.json), result, () => describeCreated(result));
    });

  cmd
    .command('list')
    .description('list accounts')
    .option('--json', 'JSON output')
    .action(async (opts: { json?: boolean }) => {
      const accounts = await import('../../server/domains/accounts/service.js');
      const rows = await withServices(loadConfig({ configFile: globals().config }), (services) => accounts.listAll(adminCtx(services)), { migrate: true });
      emit(Boolean(opts.json), rows, () => table(rows, ['id', 'name', 'createdAt']));
    });

  registerAccountPlan(cmd, globals);
}
