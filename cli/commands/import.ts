import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import { withServices } from '../database.js';
import { accountCtx, type Mode } from '../context.js';
import { emit, needSecret, note, progressBar, UsageError } from '../io.js';
import type { GlobalOptions } from '../globals.js';
import type { TenantCtx } from '../../server/core/context.js';

interface DispatchOptions extends CommonImportOptions {
  fromUrl: string;
  apiKey?: string;
  pageSize: string;
}

interface ZendeskOptions extends CommonImportOptions {
  subdomain?: string;
  email: string;
  token?: string;
  baseUrl?: string;
  requestsPerMinute: string;
}

export function registerImport(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('import').description('bring history from another help desk into an account: resumable, and a second run creates nothing new');

  withCommonOptions(cmd.command('dispatch'))
    .description(
      'copy an account of a server that speaks this interface (the hosted product, or another ticketd) through its public API: brands with their settings, statuses, fields, categories, tags, companies, contacts, tickets with their comments, attachments and watchers, and webhooks (created disabled)',
    )
    .requiredOption('--from-url <url>', "the source's base URL (https://api.example.com)")
    .option('--api-key <key>', 'an API key of the source account (or TICKETD_IMPORT_API_KEY; asked on a terminal)')
    .option(
      '--page-size <n>',
      'tickets read and written together, 1 to 1000 (the list of a source without the export reads at most 100): larger pages are faster and hold more in memory',
      '100',
    )
    .action(async (opts: DispatchOptions) => {
      const url = httpUrl(opts.fromUrl, '--from-url');
      const pageSize = Number(opts.pageSize);
      if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 1000) throw new UsageError('--page-size must be a whole number from 1 to 1000');
      const common = await commonOptions(opts);
      const apiKey = await needSecret(opts.apiKey, '--api-key', 'TICKETD_IMPORT_API_KEY', "The source's API key");
      const [{ DispatchSource }, { importDispatch }] = await Promise.all([
        import('../../server/integrations/import-dispatch-source.js'),
        import('../../server/flows/import-dispatch.js'),
      ]);
      await runImport(globals, opts, common, (ctx, options, onRetry) => importDispatch(ctx, new DispatchSource(url.toString(), apiKey, { onRetry }), options, pageSize));
    });

  withCommonOptions(cmd.command('zendesk'))
    .description(
      "copy a Zendesk Support account through its REST API: brands, the on-hold status, ticket fields (groups as a `group` field), organizations, end-users, tickets with their comments and attachments, and satisfaction ratings; agents are matched to this account's members by email",
    )
    .option('--subdomain <name>', 'the Zendesk subdomain (acme for https://acme.zendesk.com)')
    .requiredOption('--email <address>', 'the Zendesk agent or admin the API token belongs to')
    .option('--token <token>', 'a Zendesk API token (or TICKETD_ZENDESK_TOKEN; asked on a terminal)')
    .option('--base-url <url>', 'read from this URL instead of https://<subdomain>.zendesk.com')
    .option(
      '--requests-per-minute <n>',
      "at most this many requests to Zendesk in any minute (the incremental export at most 10), kept under the account's own limit: the rest is left to the help desk still in use",
      '200',
    )
    .action(async (opts: ZendeskOptions) => {
      if (!opts.subdomain && !opts.baseUrl) throw new UsageError('--subdomain (or --base-url) is required');
      if (opts.subdomain !== undefined && !/^[a-z0-9][a-z0-9-]*$/i.test(opts.subdomain)) throw new UsageError('--subdomain must be a Zendesk subdomain such as acme');
      const url = httpUrl(opts.baseUrl ?? `https://${opts.subdomain!.toLowerCase()}.zendesk.com`, '--base-url');
      const perMinute = Number(opts.requestsPerMinute);
      if (!Number.isInteger(perMinute) || perMinute < 1) throw new UsageError('--requests-per-minute must be a whole number of at least 1');
      const common = await commonOptions(opts);
      const token = await needSecret(opts.token, '--token', 'TICKETD_ZENDESK_TOKEN', 'The Zendesk API token');
      const [{ ZendeskSource }, { importZendesk }] = await Promise.all([
        import('../../server/integrations/import-zendesk-source.js'),
        import('../../server/flows/import-zendesk.js'),
      ]);
      const name = opts.subdomain?.toLowerCase() ?? url.origin;
      await runImport(globals, opts, common, async (ctx, options, onRetry) => {
        const source = new ZendeskSource({ baseUrl: url.toString(), email: opts.email, token, requestsPerMinute: perMinute, onRetry });
        try {
          return await importZendesk(ctx, source, name, options);
        } finally {
          await source.close();
        }
      });
    });
  registerRt(cmd, globals);
}

interface RtOptions extends CommonImportOptions {
  url: string;
  token?: string;
  queue?: string[];
}

/** The rt subcommand: Request Tracker 5 through REST2. */
function registerRt(cmd: Command, globals: () => GlobalOptions): void {
  withCommonOptions(cmd.command('rt'))
    .description(
      "copy the queues of a Request Tracker 5 through its REST2 interface: each queue as a brand, its ticket custom fields, its tickets with their requestor (a contact), owner (the target's member with the same email), replies (public comments), comments (internal), status changes (internal notes) and files; RT's ticket ids are the numbers with --keep-numbers",
    )
    .requiredOption('--url <url>', "RT's address (https://rt.example.com, or its REST2 base …/REST/2.0)")
    .option('--token <token>', 'an RT auth token of a user who sees the queues (or TICKETD_RT_TOKEN; asked on a terminal)')
    .option('--queue <name>', 'import this queue only (repeat for several; default: every queue the token sees)', (v: string, all: string[] = []) => [...all, v])
    .action(async (opts: RtOptions) => {
      const url = httpUrl(opts.url, '--url');
      const common = await commonOptions(opts);
      const token = await needSecret(opts.token, '--token', 'TICKETD_RT_TOKEN', "Request Tracker's auth token");
      const [{ RtSource }, { importRt }] = await Promise.all([import('../../server/integrations/import-rt-source.js'), import('../../server/flows/import-rt.js')]);
      await runImport(globals, opts, common, (ctx, options, onRetry) => importRt(ctx, new RtSource(url.toString(), token, { onRetry }), { ...options, queues: opts.queue }));
    });
}

/** An absolute http(s) URL given to `flag`. */
function httpUrl(value: string, flag: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`${flag} must be an absolute http(s) URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`${flag} must be an absolute http(s) URL`);
  return url;
}

/** The options every importer takes. */
export interface CommonImportOptions {
  account?: string;
  mode: string;
  since?: string;
  keepNumbers?: boolean;
  map?: string;
  dryRun?: boolean;
  json?: boolean;
}

type ImportOptions = import('../../server/flows/import-run.js').ImportOptions;
type ImportReport = import('../../server/flows/import-run.js').ImportReport;
type OnRetry = (info: { reason: string; waitMs: number }) => void;

/** The options every importer takes, and the help that goes with them. */
export function withCommonOptions(command: Command): Command {
  return command
    .option('--account <id>', 'the ticketd account to import into (default: the only one)')
    .option('--mode <mode>', 'live or test data of that account', 'live')
    .option('--since <iso>', 'only tickets updated at or after this instant (the final delta before switching over)')
    .option('--keep-numbers', "keep each ticket's number when it is free in the brand (else the next one: the report maps them)")
    .option(
      '--map <file>',
      'a JSON file mapping source statuses and fields to the target\'s instead of creating them: { "statuses": { "waiting": "pending" }, "fields": { "ticket.plan": "tier" }, "unmapped": "create" | "skip" } (skip: what it does not name and the target lacks is not created)',
    )
    .option('--dry-run', 'read everything and count what would be created or updated, writing nothing')
    .option('--json', 'one JSON line per object ({ kind, sourceId, outcome, targetId, reason? }), then the report')
    .addHelpText(
      'after',
      `
A run killed midway goes on where it stopped when started again with the same source and account.
Imported changes are audited with source "import" and announce nothing: no webhook, no mail.
See docs/import.md for the mapping of each kind and the switch-over procedure.`,
    );
}

/** The common options checked and read (--mode, --since, --map). */
export async function commonOptions(opts: CommonImportOptions): Promise<Pick<ImportOptions, 'since' | 'map'>> {
  if (opts.mode !== 'live' && opts.mode !== 'test') throw new UsageError('--mode must be live or test');
  if (opts.since !== undefined && Number.isNaN(Date.parse(opts.since))) throw new UsageError('--since must be an ISO 8601 date-time');
  return { since: opts.since === undefined ? null : new Date(opts.since).toISOString(), map: opts.map === undefined ? undefined : await readMap(opts.map) };
}

/**
 * Runs an importer into the account asked for: a progress bar of tickets on a terminal, or with
 * --json a line per object and per retry; then the report.
 */
export async function runImport(
  globals: () => GlobalOptions,
  opts: CommonImportOptions,
  common: Pick<ImportOptions, 'since' | 'map'>,
  start: (ctx: TenantCtx, options: ImportOptions, onRetry: OnRetry) => Promise<ImportReport>,
): Promise<void> {
  const config = loadConfig({ configFile: globals().config });
  const { IN_FLIGHT } = await import('../../server/flows/import-run.js');
  const json = Boolean(opts.json);
  const bar = json ? null : progressBar('tickets');
  let tickets = 0;
  let total = 0;
  try {
    const report = await withServices(
      config,
      async (services) => {
        const ctx = await accountCtx(services, opts.account, opts.mode as Mode);
        const onRetry: OnRetry = ({ reason, waitMs }) => (json ? emit(true, { retry: { reason, waitMs } }, () => []) : note(`the source ${reason}: trying again in ${waitMs} ms`));
        return start(
          ctx,
          {
            ...common,
            keepNumbers: Boolean(opts.keepNumbers),
            dryRun: Boolean(opts.dryRun),
            maxBytes: config.attachmentMaxBytes,
            onObject: (e) => {
              if (json) return emit(true, e, () => []);
              if (e.kind !== 'ticket') return;
              tickets++;
              bar!.update(tickets, Math.max(total, tickets));
            },
            onTicketTotal: json
              ? undefined
              : (n) => {
                  total = n;
                },
            onNote: (line) => (json ? emit(true, { note: line }, () => []) : note(line)),
          },
          onRetry,
        );
      },
      // The importer writes several objects side by side, each in a transaction of its own.
      { migrate: true, poolMax: IN_FLIGHT + 2 },
    );
    bar?.stop();
    emit(json, { report }, () => humanReport(report));
  } finally {
    bar?.stop();
  }
}

/** The --map file: { statuses?: { key: key }, fields?: { "entity.key": key }, unmapped?: create|skip }, every value a string. */
async function readMap(file: string): Promise<NonNullable<ImportOptions['map']>> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    throw new UsageError(`--map ${file}: ${(err as Error).message}`);
  }
  const isTable = (v: unknown) => v === undefined || (typeof v === 'object' && v !== null && !Array.isArray(v) && Object.values(v).every((x) => typeof x === 'string' && x));
  const given = parsed as { statuses?: unknown; fields?: unknown; unmapped?: unknown };
  const extra = typeof parsed === 'object' && parsed !== null ? Object.keys(parsed).filter((k) => !['statuses', 'fields', 'unmapped'].includes(k)) : [];
  if (
    typeof parsed !== 'object' ||
    parsed === null ||
    Array.isArray(parsed) ||
    extra.length ||
    !isTable(given.statuses) ||
    !isTable(given.fields) ||
    ![undefined, 'create', 'skip'].includes(given.unmapped as string)
  ) {
    throw new UsageError(
      `--map ${file} must be { "statuses": { "<source key>": "<target key>" }, "fields": { "<entity>.<source key>": "<target key>" }, "unmapped": "create" | "skip" }`,
    );
  }
  return parsed as NonNullable<ImportOptions['map']>;
}

function humanReport(r: ImportReport): string[] {
  const lines = [`${r.dryRun ? 'Dry run (nothing written): import' : r.resumed ? 'Resumed import' : 'Import'} from ${r.source}:`];
  for (const [kind, c] of Object.entries(r.counts)) lines.push(`  ${kind.padEnd(11)} ${c.created} created, ${c.updated} updated, ${c.unchanged} unchanged, ${c.skipped} skipped`);
  if (r.skipped.length) {
    lines.push('Skipped:');
    for (const s of r.skipped) lines.push(`  ${s.kind} ${s.sourceId}: ${s.reason}`);
  }
  for (const m of r.mapped) lines.push(`  ${m.kind} ${m.from} mapped to ${m.to} (--map)`);
  if (r.renumbered.length) lines.push(`${r.renumbered.length} ticket(s) took another number (--json lists them; --keep-numbers keeps free ones).`);
  for (const n of r.notes) lines.push(n);
  lines.push(`Not copied: ${r.notCopied.join('; ')}.`);
  return lines;
}
