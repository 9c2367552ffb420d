import type { Command } from 'commander';
import { Option } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import type { BrandDomainView } from '../../server/domains/brand-domains/schemas.js';
import { withServices } from '../database.js';
import { brandCtx } from '../context.js';
import { emit, ReportedFailure, table, UsageError } from '../io.js';
import type { GlobalOptions } from '../globals.js';

const service = () => import('../../server/domains/brand-domains/service.js');

/** The records to publish, one line each. */
const recordLines = (d: BrandDomainView) =>
  table(
    d.records.map((r) => ({ ...r, value: r.priority === undefined ? r.value : `${r.priority} ${r.value}`, required: r.required ? 'yes' : 'suggested' })),
    ['type', 'name', 'value', 'status', 'required'],
  );

export function registerDomains(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('domains').description("a brand's own mail domains: the DNS records to publish, and their verification");
  const run = <T>(brandId: string, fn: (ctx: Awaited<ReturnType<typeof brandCtx>>) => Promise<T>) =>
    withServices(loadConfig({ configFile: globals().config }), async (services) => fn(await brandCtx(services, brandId)), { migrate: true });

  cmd
    .command('list <brandId>')
    .description("the brand's domains, verified or not")
    .option('--json', 'JSON output')
    .action(async (brandId: string, opts: { json?: boolean }) => {
      const brandDomains = await service();
      const rows = await run(brandId, (ctx) => brandDomains.list(ctx, brandId));
      emit(Boolean(opts.json), rows, () => table(rows as unknown as Record<string, unknown>[], ['id', 'domain', 'type', 'verified', 'isPrimary', 'fromEmail', 'checkedAt']));
    });

  cmd
    .command('add <brandId> <domain>')
    .description('add a domain and print the DNS records to publish (then: domains verify)')
    .addOption(new Option('--type <type>', 'OUTBOUND sends the brand’s mail; INBOUND receives it').choices(['OUTBOUND', 'INBOUND']).default('OUTBOUND'))
    .option('--json', 'JSON output')
    .action(async (brandId: string, domain: string, opts: { type: 'OUTBOUND' | 'INBOUND'; json?: boolean }) => {
      const { createDomain } = await import('../../server/flows/brand-domains.js');
      const created = await run(brandId, (ctx) => createDomain(ctx, brandId, { domain, type: opts.type }));
      emit(Boolean(opts.json), created, () => [
        `domain ${created.id} ${created.domain} (${created.type}${created.isPrimary ? ', primary' : ''}): publish these records, then run \`ticketd domains verify ${brandId} ${created.domain}\``,
        ...recordLines(created),
      ]);
    });

  cmd
    .command('verify <brandId> <domain>')
    .description('look the records of a domain (its id or name) up in DNS now; exit 1 unless verified')
    .option('--json', 'JSON output')
    .action(async (brandId: string, domain: string, opts: { json?: boolean }) => {
      const brandDomains = await service();
      const { result, view } = await run(brandId, async (ctx) => {
        const all = await brandDomains.list(ctx, brandId);
        const matches = all.filter((d) => d.id === domain || d.domain === domain.toLowerCase());
        if (matches.length !== 1)
          throw new UsageError(matches.length ? `${domain} is both an OUTBOUND and an INBOUND domain of the brand: name it by its id` : `the brand has no domain ${domain}`);
        const result = await brandDomains.verify(ctx, brandId, matches[0]!.id);
        return { result, view: await brandDomains.get(ctx, brandId, matches[0]!.id) };
      });
      emit(Boolean(opts.json), { ...result, domain: view }, () => [
        result.verified ? `${view.domain} is verified` : `${view.domain} is not verified: ${result.error}`,
        ...recordLines(view),
      ]);
      if (!result.verified) throw new ReportedFailure();
    });
}
