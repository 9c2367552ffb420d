import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { DEFAULT_CONFIG_FILE, loadConfig } from '../../server/core/config.js';
import { withServices } from '../database.js';
import { adminCtx } from '../context.js';
import { canPrompt, choose, emit, need, UsageError } from '../io.js';
import type { GlobalOptions } from '../globals.js';
import { describeCreated } from './accounts.js';

interface InitOptions {
  database?: 'embedded' | 'external';
  databaseUrl?: string;
  dataDir?: string;
  ownerEmail?: string;
  ownerName?: string;
  accountName?: string;
  brandName?: string;
  json?: boolean;
}

/** Writes the database choice into the config file, keeping whatever else it holds. */
function saveDatabaseChoice(file: string, databaseUrl: string | null, dataDir: string | undefined): void {
  const exists = existsSync(file);
  const current = exists ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>) : {};
  const next = { ...current, databaseUrl, ...(dataDir ? { dataDir } : {}) };
  // It may hold a database password: readable by its owner only. writeFileSync's mode applies to a
  // new file; an existing one is narrowed first, so the password never lands in a wider file.
  if (exists) chmodSync(file, 0o600);
  writeFileSync(file, `${JSON.stringify(next, null, 2)}\n`, { mode: 0o600 });
}

export function registerInit(program: Command, globals: () => GlobalOptions): void {
  program
    .command('init')
    .description('set up this installation: choose the database, migrate it, create the owner account, first brand and keys')
    .option('--database <kind>', 'embedded (ticketd runs PostgreSQL itself) or external')
    .option('--database-url <url>', 'external PostgreSQL URL (implies --database external; not with --database embedded)')
    .option('--data-dir <dir>', 'data directory for the embedded database and files')
    .option('--owner-email <email>', "owner's email")
    .option('--owner-name <name>', "owner's name")
    .option('--account-name <name>', 'account name')
    .option('--brand-name <name>', 'first brand name')
    .option('--json', 'JSON output')
    .action(async (opts: InitOptions) => {
      if (opts.database && opts.database !== 'embedded' && opts.database !== 'external') throw new UsageError('--database must be embedded or external');
      // Saying both is a contradiction, not a choice to guess at.
      if (opts.database === 'embedded' && opts.databaseUrl) throw new UsageError('--database embedded takes no --database-url (that URL is for --database external)');
      let kind: string | undefined = opts.databaseUrl ? 'external' : opts.database;
      if (!kind) {
        kind = canPrompt()
          ? await choose('Which PostgreSQL should ticketd use?', [
              { name: 'Embedded: ticketd runs its own, under the data directory', value: 'embedded' },
              { name: 'External: an existing PostgreSQL 15+ (give its URL)', value: 'external' },
            ])
          : 'embedded';
      }
      const databaseUrl = kind === 'external' ? await need(opts.databaseUrl, '--database-url', 'PostgreSQL URL (postgres://user:password@host:5432/db)') : null;
      const ownerEmail = await need(opts.ownerEmail, '--owner-email', "Owner's email");
      const ownerName = await need(opts.ownerName, '--owner-name', "Owner's name", 'Owner');
      const accountName = await need(opts.accountName, '--account-name', 'Account name', ownerName);
      const brandName = await need(opts.brandName, '--brand-name', 'First brand name', 'My Brand');

      const file = path.resolve(globals().config ?? process.env.TICKETD_CONFIG ?? DEFAULT_CONFIG_FILE);
      saveDatabaseChoice(file, databaseUrl, opts.dataDir);
      const config = loadConfig({ configFile: file });
      const { bootstrapIfEmpty } = await import('../../server/flows/accounts.js');
      const created = await withServices(config, (services) => bootstrapIfEmpty(adminCtx(services), { email: ownerEmail, name: ownerName, accountName, brandName }), {
        migrate: true,
      });
      emit(Boolean(opts.json), { configFile: file, database: kind, created }, () => [
        `saved the database choice (${kind}) to ${file}`,
        ...(created ? describeCreated(created) : ['this database already has accounts: nothing was created (use `ticketd accounts create` or `ticketd keys create`)']),
        'start the server with: bin/ticketd start',
      ]);
    });
}
