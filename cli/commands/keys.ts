import { Option, type Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import { tenantCtx } from '../../server/core/context.js';
import type { Services } from '../../server/core/services.js';
import { withServices } from '../database.js';
import { accountCtx, adminCtx, type Mode } from '../context.js';
import { confirmOrFlag, emit, table, UsageError } from '../io.js';
import type { GlobalOptions } from '../globals.js';

const service = () => import('../../server/domains/api-keys/service.js');

/** A key is named by id alone: its account and mode are looked up. */
async function keyCtx(services: Services, keyId: string) {
  const apiKeys = await service();
  const { accountId, livemode } = await apiKeys.ownerOf(adminCtx(services), keyId);
  return tenantCtx(adminCtx(services), accountId, livemode);
}

export function registerKeys(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('keys').description('API keys');
  const config = () => loadConfig({ configFile: globals().config });

  cmd
    .command('create')
    .description('create an API key; the secret is printed once')
    .option('--name <name>', 'a name to recognise it by')
    .option('--brands <ids>', 'limit the key to these brands (comma-separated); default: all brands')
    .option('--account <id>', 'account id (default: the only account)')
    .addOption(new Option('--mode <mode>', 'sk_live_ or sk_test_ key').choices(['live', 'test']).default('live'))
    .option('--json', 'JSON output')
    .action(async (opts: { name?: string; brands?: string; account?: string; mode: Mode; json?: boolean }) => {
      const brandIds = opts.brands
        ?.split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      const apiKeys = await service();
      const key = await withServices(
        config(),
        async (services) => apiKeys.create(await accountCtx(services, opts.account, opts.mode), { name: opts.name, ...(brandIds?.length ? { brandIds } : {}) }),
        { migrate: true },
      );
      emit(Boolean(opts.json), key, () => [`created ${key.id} "${key.name}" (${key.allBrands ? 'all brands' : key.brandIds.join(', ')})`, `secret, shown this once: ${key.key}`]);
    });

  cmd
    .command('list')
    .description('list active keys (secrets are never shown again)')
    .option('--account <id>', 'account id (default: the only account)')
    .addOption(new Option('--mode <mode>', 'live or test keys').choices(['live', 'test']).default('live'))
    .option('--json', 'JSON output')
    .action(async (opts: { account?: string; mode: Mode; json?: boolean }) => {
      const apiKeys = await service();
      const rows = await withServices(config(), async (services) => apiKeys.list(await accountCtx(services, opts.account, opts.mode)), { migrate: true });
      emit(Boolean(opts.json), rows, () =>
        table(
          rows.map((k) => ({ ...k, scope: k.allBrands ? 'all brands' : k.brandIds.join(',') })),
          ['id', 'name', 'keyPreview', 'scope', 'lastUsedAt', 'expiresAt', 'createdAt'],
        ),
      );
    });

  cmd
    .command('revoke <keyId>')
    .description('revoke a key now; it fails with 401 from the next request on')
    .option('--yes', 'do not ask for confirmation')
    .option('--json', 'JSON output')
    .action(async (keyId: string, opts: { yes?: boolean; json?: boolean }) => {
      if (!(await confirmOrFlag(opts.yes, `Revoke ${keyId}? Integrations using it stop working at once.`))) return;
      const apiKeys = await service();
      const result = await withServices(config(), async (services) => apiKeys.revoke(await keyCtx(services, keyId), keyId), { migrate: true });
      emit(Boolean(opts.json), result, () => [`revoked ${keyId}`]);
    });

  cmd
    .command('rotate <keyId>')
    .description('issue a new key with the same name and scope; revoke the old one now or after --grace minutes')
    .option('--grace <minutes>', 'minutes the old key keeps working', '0')
    .option('--json', 'JSON output')
    .action(async (keyId: string, opts: { grace: string; json?: boolean }) => {
      const grace = Number(opts.grace);
      if (!Number.isInteger(grace) || grace < 0 || grace > 43_200) throw new UsageError('--grace must be a whole number of minutes from 0 to 43200');
      const apiKeys = await service();
      const result = await withServices(config(), async (services) => apiKeys.rotate(await keyCtx(services, keyId), keyId, grace), { migrate: true });
      emit(Boolean(opts.json), result, () => [
        `new key ${result.newKey.id}; secret, shown this once: ${result.newKey.key}`,
        grace ? `old key ${keyId} keeps working until ${result.oldKey.expiresAt}` : `old key ${keyId} revoked`,
      ]);
    });
}
