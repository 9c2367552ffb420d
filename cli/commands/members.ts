import type { Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import { dashboardOriginCheck, normalizeOrigin } from '../../server/core/origins.js';
import { withServices } from '../database.js';
import { adminCtx } from '../context.js';
import { emit, UsageError } from '../io.js';
import type { GlobalOptions } from '../globals.js';

export function registerMembers(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('members').description('team members of organizations (accounts)');

  cmd
    .command('login-link <email>')
    .description('print a single-use sign-in link for a member (valid 15 minutes), for servers that send no mail')
    .requiredOption('--origin <url>', 'the dashboard origin the link opens, e.g. https://dashboard.example.com (one of dashboardOrigins, or loopback)')
    .option('--account <id>', 'the organization (account) to sign in to; default: the one the member joined first')
    .option('--json', 'JSON output')
    .action(async (email: string, opts: { origin: string; account?: string; json?: boolean }) => {
      const config = loadConfig({ configFile: globals().config });
      const origin = normalizeOrigin(opts.origin);
      if (!origin) throw new UsageError(`--origin must be an origin such as https://dashboard.example.com (no path), not ${opts.origin}`);
      if (!dashboardOriginCheck(config)(origin)) {
        throw new UsageError(`${origin} is not a dashboard origin of this server: add it to dashboardOrigins (TICKETD_DASHBOARD_ORIGINS)`);
      }
      const { loginLink } = await import('../../server/flows/sign-in.js');
      const link = await withServices(config, (services) => loginLink(adminCtx(services), email, origin, opts.account), { migrate: true });
      emit(Boolean(opts.json), link, () => [link.url, `for ${link.email} (${link.memberId}) in ${link.organizationId}; works once, until ${link.expiresAt}`]);
    });
}
