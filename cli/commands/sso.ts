import type { Command } from 'commander';
import { Option } from 'commander';
import { loadConfig, publicBaseUrl, type Config } from '../../server/core/config.js';
import type { TenantCtx } from '../../server/core/context.js';
import { HttpError } from '../../server/core/errors.js';
import type { SsoConfigView } from '../../server/domains/sso/schemas.js';
import { accountCtx } from '../context.js';
import { withServices } from '../database.js';
import type { GlobalOptions } from '../globals.js';
import { confirmOrFlag, emit, need, needSecret } from '../io.js';

/** The configuration as lines for people (the secret is never shown: it is never returned). */
const describe = (c: SsoConfigView) => [
  `single sign-on of ${c.organizationId}: ${c.issuer}`,
  `  client id:        ${c.clientId} (secret set)`,
  `  allowed domains:  ${c.allowedDomains.join(', ')}`,
  `  new members:      ${c.defaultRole}`,
  `  magic links:      ${c.allowMagicLinks ? 'allowed too' : 'refused: single sign-on is required'}`,
  `  redirect URI:     ${c.redirectUri} (register it at the provider)`,
];

const service = () => import('../../server/domains/sso/service.js');

const collect = (value: string, previous: string[] = []) => [...previous, value];

interface SetOptions {
  issuer?: string;
  clientId?: string;
  clientSecret?: string;
  allowedDomain?: string[];
  defaultRole?: 'admin' | 'member';
  allowMagicLinks?: boolean;
  json?: boolean;
}

export function registerSso(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('sso').description("an organization's single sign-on with its OpenID Connect provider (the owner's PUT /v1/auth/organization/sso)");
  const run = async <T>(accountId: string, fn: (ctx: TenantCtx, redirectUri: string) => Promise<T>) => {
    const config: Config = loadConfig({ configFile: globals().config });
    const redirectUri = `${publicBaseUrl(config)}${(await service()).CALLBACK_PATH}`;
    return withServices(config, async (services) => fn(await accountCtx(services, accountId, 'live'), redirectUri), { migrate: true });
  };

  cmd
    .command('show <account>')
    .description("the organization's single sign-on, without its secret; exit 1 when it has none")
    .option('--json', 'JSON output')
    .action(async (accountId: string, opts: { json?: boolean }) => {
      const sso = await service();
      const view = await run(accountId, (ctx, redirectUri) => sso.get(ctx, redirectUri));
      emit(Boolean(opts.json), view, () => describe(view));
    });

  cmd
    .command('set <account>')
    .description('configure it (the issuer is checked by discovery); options left out keep their current value, or take the default the first time')
    .option('--issuer <url>', "the provider's issuer, an https URL")
    .option('--client-id <id>', 'the OAuth client ticketd is at the provider')
    .option('--client-secret <secret>', "the client's secret (else TICKETD_SSO_CLIENT_SECRET, else the stored one, else asked without echo)")
    .option('--allowed-domain <domain>', 'an email domain the provider may sign in (repeat for several; replaces the list)', collect)
    .addOption(new Option('--default-role <role>', 'the role of members created at their first sign-in (default member)').choices(['admin', 'member']))
    .option('--allow-magic-links', 'members may still sign in by magic link (the default)')
    .option('--no-allow-magic-links', 'single sign-on is required: magic links are refused (sso_required)')
    .option('--json', 'JSON output')
    .action(async (accountId: string, opts: SetOptions) => {
      const sso = await service();
      const view = await run(accountId, async (ctx, redirectUri) => {
        const current = await sso.get(ctx, redirectUri).catch((err: unknown) => {
          if (err instanceof HttpError && err.code === 'sso_not_configured') return null;
          throw err;
        });
        // What is not given: the current value, else asked for on a terminal (none: exit 2 naming the flag).
        const issuer = opts.issuer ?? current?.issuer ?? (await need(undefined, '--issuer', 'Issuer (https URL)'));
        const clientId = opts.clientId ?? current?.clientId ?? (await need(undefined, '--client-id', 'Client id'));
        const allowedDomains = opts.allowedDomain ?? current?.allowedDomains ?? [await need(undefined, '--allowed-domain', 'Allowed email domain')];
        const given = opts.clientSecret || process.env.TICKETD_SSO_CLIENT_SECRET || undefined;
        const clientSecret = given ?? (current ? undefined : await needSecret(undefined, '--client-secret', 'TICKETD_SSO_CLIENT_SECRET', 'Client secret'));
        const input = {
          issuer,
          clientId,
          ...(clientSecret ? { clientSecret } : {}),
          allowedDomains,
          defaultRole: opts.defaultRole ?? current?.defaultRole,
          allowMagicLinks: opts.allowMagicLinks ?? current?.allowMagicLinks,
        };
        return sso.configure(ctx, input, redirectUri);
      });
      emit(Boolean(opts.json), view, () => describe(view));
    });

  cmd
    .command('remove <account>')
    .description('remove it: magic links work again; sign-ins under way end')
    .option('--yes', 'do not ask for confirmation')
    .option('--json', 'JSON output')
    .action(async (accountId: string, opts: { yes?: boolean; json?: boolean }) => {
      if (!(await confirmOrFlag(opts.yes, `Remove the single sign-on of ${accountId}? Its members sign in by magic link again.`))) return;
      const sso = await service();
      const result = await run(accountId, (ctx) => sso.remove(ctx));
      emit(Boolean(opts.json), result, () => [`single sign-on of ${accountId} removed: its members sign in by magic link`]);
    });
}
