import { createWriteStream, renameSync, rmSync } from 'node:fs';
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import { withServices } from '../database.js';
import { brandCtx } from '../context.js';
import { emit, note, progressBar, UsageError } from '../io.js';
import type { GlobalOptions } from '../globals.js';

/** The list's filters as flags: each flag's value goes to the query parameter of the same name (GET …/tickets/export). */
const FILTER_FLAGS = [
  ['--status <keys>', 'status', 'comma-separated status keys; active = open,pending'],
  ['--priority <priority>', 'priority', 'low, normal, medium, high or urgent'],
  ['--assignee-id <id>', 'assigneeId', 'a member id; unassigned for none'],
  ['--customer-id <id>', 'customerId', "the customer's contact id"],
  ['--customer-email <email>', 'customerEmail', "the customer's email"],
  ['--company-id <id>', 'companyId', "the customer's company"],
  ['--category-id <id>', 'categoryId', 'a category id; null for uncategorized'],
  ['--tag-ids <ids>', 'tagIds', 'comma-separated tag ids: the ticket has them all'],
  ['--created-after <time>', 'createdAfter', 'ISO date-time'],
  ['--created-before <time>', 'createdBefore', 'ISO date-time'],
  ['--search <text>', 'search', 'full-text search, as the list takes it'],
  ['--is-spam <bool>', 'isSpam', 'true: only spam (left out by default)'],
] as const;

interface ExportFlags {
  account?: string;
  format: string;
  comments?: boolean;
  watchers?: boolean;
  out?: string;
  json?: boolean;
  [flag: string]: string | boolean | undefined;
}

export function registerTickets(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('tickets').description("a brand's tickets");
  const exportCmd = cmd
    .command('export <brandId>')
    .description('write every ticket of the brand that the list with these filters holds, as NDJSON (one ticket a line) or CSV, oldest first')
    .option('--account <accountId>', 'the account the brand must belong to (a check)')
    .option('--format <format>', 'ndjson or csv', 'ndjson')
    .option('--comments', 'NDJSON only: each ticket with its comments (every live comment, oldest first, each with its parentId)')
    .option('--watchers', 'NDJSON only: each ticket with its watchers')
    .option('--out <file>', 'write to this file (whole or not at all: a failed export leaves no file) instead of stdout')
    .option('--json', 'with --out: the summary as JSON ({ brandId, format, tickets, file })');
  for (const [flag, , description] of FILTER_FLAGS) exportCmd.option(flag, description);
  exportCmd
    .addHelpText(
      'after',
      `
The same document as GET /v1/brands/{brandId}/tickets/export (see docs/api.md), read straight from
the database page by page; spam and deleted tickets are left out as in the list. A progress bar
shows on a terminal (stderr).`,
    )
    .action(async (brandId: string, opts: ExportFlags) => {
      if (opts.format !== 'ndjson' && opts.format !== 'csv') throw new UsageError('--format must be ndjson or csv');
      if (opts.format === 'csv' && opts.comments) throw new UsageError('--comments needs --format ndjson (a CSV has commentCount)');
      if (opts.format === 'csv' && opts.watchers) throw new UsageError('--watchers needs --format ndjson');
      if (opts.json && !opts.out) throw new UsageError('--json needs --out: without it the export itself is on stdout');
      const query: Record<string, unknown> = {};
      // Each flag's option name (commander's camel case) is its query parameter's.
      for (const [, name] of FILTER_FLAGS) if (opts[name] !== undefined) query[name] = opts[name];
      const [{ exportTickets, exportFilters }, tickets] = await Promise.all([import('../../server/flows/ticket-export.js'), import('../../server/domains/tickets/service.js')]);
      const checked = exportFilters(query);
      if ('problems' in checked) throw new UsageError(`bad filter: ${checked.problems.join('; ')}`);
      const format = opts.format;
      const summary = await withServices(loadConfig({ configFile: globals().config }), async (services) => {
        const ctx = await brandCtx(services, brandId);
        if (opts.account !== undefined && opts.account !== ctx.accountId) throw new UsageError(`brand ${brandId} is not in account ${opts.account}`);
        const exported = await exportTickets(ctx, brandId, checked.filters, { format, comments: Boolean(opts.comments), watchers: Boolean(opts.watchers), commentShape: 'flat' });
        const total = await tickets.countMatching(ctx, brandId, checked.filters);
        const bar = progressBar('tickets');
        bar.update(0, total);
        async function* counted() {
          for await (const chunk of exported.chunks) {
            yield chunk;
            bar.update(exported.written, Math.max(total, exported.written));
          }
        }
        // Into a file beside the one named, renamed when whole: a file of that name is always a complete export.
        const partial = opts.out ? `${opts.out}.partial` : null;
        const into: Writable = partial ? createWriteStream(partial) : process.stdout;
        try {
          await pipeline(Readable.from(counted(), { objectMode: false }), into, { end: partial !== null });
          if (partial) renameSync(partial, opts.out!);
        } catch (err) {
          if (partial) rmSync(partial, { force: true });
          throw err;
        } finally {
          bar.stop();
        }
        return { brandId, format, tickets: exported.written, file: opts.out ?? null };
      });
      if (opts.out) emit(Boolean(opts.json), summary, () => [`${summary.tickets} tickets written to ${summary.file}`]);
      else note(`${summary.tickets} tickets exported`);
    });
}
