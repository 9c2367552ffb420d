import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import { migrateLatest, migrationStatus, rollback } from '../../server/core/migrate.js';
import { provisionDatabase } from '../../server/core/provision.js';
import { backupDatabase, inspectDatabase, restoreDatabase } from '../../server/integrations/pg-tools.js';
import { withDatabase, withServices } from '../database.js';
import { confirmOrFlag, emit, need } from '../io.js';
import type { GlobalOptions } from '../globals.js';

export function registerDb(program: Command, globals: () => GlobalOptions): void {
  const db = program.command('db').description('database schema and provisioning');

  db.command('migrate')
    .description('apply pending migrations')
    .option('--json', 'JSON output')
    .action(async (opts: { json?: boolean }) => {
      const applied = await withServices(loadConfig({ configFile: globals().config }), (services) => migrateLatest(services.db, services.directUrl));
      emit(Boolean(opts.json), { applied }, () => (applied.length ? applied.map((m) => `applied ${m}`) : ['already up to date']));
    });

  db.command('rollback')
    .description('undo the last batch of migrations (or all with --all); destroys the data in those tables')
    .option('--all', 'undo every migration')
    .option('--yes', 'do not ask for confirmation')
    .option('--json', 'JSON output')
    .action(async (opts: { all?: boolean; yes?: boolean; json?: boolean }) => {
      if (!(await confirmOrFlag(opts.yes, `Roll back ${opts.all ? 'ALL migrations' : 'the last batch'}? Tables and their data will be dropped.`))) return;
      const rolledBack = await withServices(loadConfig({ configFile: globals().config }), (services) => rollback(services.db, Boolean(opts.all)));
      emit(Boolean(opts.json), { rolledBack }, () => (rolledBack.length ? rolledBack.map((m) => `rolled back ${m}`) : ['nothing to roll back']));
    });

  db.command('status')
    .description('list applied and pending migrations')
    .option('--json', 'JSON output')
    .action(async (opts: { json?: boolean }) => {
      const status = await withServices(loadConfig({ configFile: globals().config }), (services) => migrationStatus(services.db));
      emit(Boolean(opts.json), status, () => [
        ...status.completed.map((m) => `applied  ${m}`),
        ...status.pending.map((m) => `pending  ${m}`),
        status.pending.length ? `${status.pending.length} pending` : 'up to date',
      ]);
    });

  db.command('backup <file>')
    .description("write the whole database to FILE with PostgreSQL's pg_dump (custom format); attachments under the data directory are not in it")
    .option('--yes', 'replace FILE if it exists')
    .option('--json', 'JSON output')
    .addHelpText(
      'after',
      "\nNeeds pg_dump of the server's major version or newer: next to the embedded binaries, on PATH, or in /usr/lib/postgresql/*/bin. See docs/operations.md.",
    )
    .action(async (file: string, opts: { yes?: boolean; json?: boolean }) => {
      const config = loadConfig({ configFile: globals().config });
      if (existsSync(file) && !(await confirmOrFlag(opts.yes, `${file} exists. Replace it?`))) return;
      const result = await withDatabase(config, (handle) => backupDatabase(handle, file));
      emit(Boolean(opts.json), result, () => [`backed up database ${result.database} (PostgreSQL ${result.serverVersion}) to ${result.file}: ${result.bytes} bytes`]);
    });

  db.command('restore <file>')
    .description('load a backup made by `db backup` into the configured database with pg_restore, in one transaction')
    .option('--yes', 'replace everything in a database that is not empty')
    .option('--json', 'JSON output')
    .addHelpText(
      'after',
      `
Into an empty database it needs no confirmation. A database that is not empty is emptied first
(schema public dropped and made anew) only with --yes, and only while nothing else is connected
to it: stop ticketd first. Start ticketd afterwards: it applies any migration the backup predates.`,
    )
    .action(async (file: string, opts: { yes?: boolean; json?: boolean }) => {
      const config = loadConfig({ configFile: globals().config });
      const result = await withDatabase(config, async (handle) => {
        const target = await inspectDatabase(handle.url);
        const replace = target.relations > 0;
        if (
          replace &&
          !(await confirmOrFlag(opts.yes, `Database ${target.database} is not empty (${target.relations} tables, views and sequences). Drop all of it and restore ${file}?`))
        ) {
          return null;
        }
        return restoreDatabase(handle, file, { replace });
      });
      if (!result) return;
      emit(Boolean(opts.json), result, () => [`restored ${result.file} into database ${result.database}${result.replaced ? ' (what it held was dropped first)' : ''}`]);
    });

  db.command('provision')
    .description('create the role and database ticketd will use on an existing PostgreSQL, and print its DATABASE_URL')
    .option('--admin-url <url>', 'connection URL of an administrator (or TICKETD_ADMIN_URL)')
    .option('--role-name <name>', 'login role to create', 'ticketd')
    .option('--database-name <name>', 'database to create', 'ticketd')
    .option('--reset-password', 'give an existing role a new password')
    .option('--json', 'JSON output')
    .action(async (opts: { adminUrl?: string; roleName: string; databaseName: string; resetPassword?: boolean; json?: boolean }) => {
      const adminUrl = await need(opts.adminUrl ?? process.env.TICKETD_ADMIN_URL, '--admin-url', 'Administrator connection URL');
      const result = await provisionDatabase(adminUrl, { role: opts.roleName, database: opts.databaseName, resetPassword: opts.resetPassword });
      emit(Boolean(opts.json), result, () => [
        `${result.createdRole ? 'created' : 'updated'} role ${result.role}; database ${result.database} ${result.createdDatabase ? 'created' : 'already existed'}`,
        `DATABASE_URL=${result.databaseUrl}`,
      ]);
    });
}
