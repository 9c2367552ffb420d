import type { Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import { withServices } from '../database.js';
import { brandCtx } from '../context.js';
import { emit, table } from '../io.js';
import type { GlobalOptions } from '../globals.js';

export function registerStores(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('stores').description("a brand's connected online stores (BigCommerce): their state, and syncing them now");
  const config = () => loadConfig({ configFile: globals().config });

  cmd
    .command('list <brandId>')
    .description('the brand’s connected stores, oldest first, with the state of their syncs')
    .option('--json', 'JSON output: the stores, as GET /v1/brands/{brandId}/ecommerce/stores')
    .action(async (brandId: string, opts: { json?: boolean }) => {
      const stores = await import('../../server/domains/commerce/stores.js');
      const rows = await withServices(config(), async (services) => stores.list(await brandCtx(services, brandId), brandId), { migrate: true });
      emit(Boolean(opts.json), rows, () =>
        rows.length ? table(rows, ['id', 'name', 'platform', 'storeId', 'status', 'lastSyncAt', 'errorCount', 'errorMessage']) : ['no store is connected to this brand'],
      );
    });

  cmd
    .command('sync <brandId> [storeId]')
    .description('sync the brand’s stores (or one) now, in this process, as the dispatcher would: what changed since the last sync, everything the first time')
    .option('--json', 'JSON output: one result per store (outcome synced, failed or busy; orders and products written)')
    .action(async (brandId: string, storeId: string | undefined, opts: { json?: boolean }) => {
      const { syncNow } = await import('../../server/flows/commerce-sync.js');
      const results = await withServices(config(), async (services) => syncNow(await brandCtx(services, brandId), brandId, storeId), { migrate: true });
      emit(Boolean(opts.json), results, () =>
        results.length
          ? table(
              results.map((r) => ({ ...r })),
              ['storeId', 'name', 'outcome', 'orders', 'products', 'status', 'errorMessage'],
            )
          : ['no store of this brand to sync'],
      );
    });
}
