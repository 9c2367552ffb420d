import type { Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import { migrateLatest, migrationStatus, rollback } from '../../server/core/migrate.js';
import { provisionDatabase } from '../../server/core/provision.js';
import { withServices } from '../database.js';
import { confirmOrFlag, emit, need } from '../io.js';
import type { GlobalOptions } from '../globals.js';

export function registerDb(program: Command, globals: () => GlobalOptions): void {
  const db = program.command('db').description('database schema and provisioning');

  db.command('migrate')
    .description('apply pending migrations')
    .option('--json', 'JSON output')
    .action(async (opts: { json?: boolean }) => {
      const applied = await withServices(loadConfig({ configFile: globals().config }), (services) => migrateLatest(services.db));
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
