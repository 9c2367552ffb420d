import type { Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import { tenantCtx } from '../../server/core/context.js';
import { withServices } from '../database.js';
import { adminCtx } from '../context.js';
import { emit, table } from '../io.js';
import type { GlobalOptions } from '../globals.js';
import { parseLimit } from './outbox.js';

export function registerWebhooks(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('webhooks').description('webhooks');
  const config = () => loadConfig({ configFile: globals().config });

  cmd
    .command('deliveries <webhookId>')
    .description("a webhook's deliveries, newest first, with their status, attempts and last answer")
    .option('--limit <n>', 'how many (1-100)', '20')
    .option('--json', 'JSON output')
    .action(async (webhookId: string, opts: { limit: string; json?: boolean }) => {
      const limit = Math.min(parseLimit(opts.limit), 100);
      const webhooks = await import('../../server/domains/webhooks/service.js');
      const rows = await withServices(
        config(),
        async (services) => {
          const owner = await webhooks.ownerOf(adminCtx(services), webhookId);
          return webhooks.deliveries(tenantCtx(adminCtx(services), owner.accountId, owner.livemode), owner.brandId, webhookId, { limit });
        },
        { migrate: true },
      );
      emit(Boolean(opts.json), rows, () =>
        table(rows as unknown as Record<string, unknown>[], ['id', 'event', 'state', 'attempts', 'responseCode', 'error', 'lastAttempt', 'nextAttempt', 'createdAt']),
      );
    });
}
