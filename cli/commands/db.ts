import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { loadConfig, type Config } from '../../server/core/config.js';
import type { Backup, RestoreResult } from '../../server/integrations/backups.js';
import { withDatabase, withServices } from '../database.js';
import { confirmOrFlag, emit, fail, need, note, ReportedFailure, UsageError } from '../io.js';
import type { GlobalOptions } from '../globals.js';

const migrations = () => import('../../server/core/migrate.js');
const backups = () => import('../../server/integrations/backups.js');
/** Where the configured install keeps its files: a backup lists its bucket, a restore puts objects there. */
const storageOf = async (config: Config) => (await import('../../server/integrations/storage-from-config.js')).storageFromConfig(config, note);

export function registerDb(program: Command, globals: () => GlobalOptions): void {
  const db = program.command('db').description('database schema, provisioning, backup and restore');

  db.command('migrate')
    .description('apply pending migrations')
    .option('--json', 'JSON output')
    .action(async (opts: { json?: boolean }) => {
      const { migrateLatest } = await migrations();
      const applied = await withServices(loadConfig({ configFile: globals().config }), (services) => migrateLatest(services.db, services.directUrl));
      emit(Boolean(opts.json), { applied }, () => (applied.length ? applied.map((m) => `applied ${m}`) : ['already up to date']));
    });

  db.command('distribute')
    .description(
      'place the tables of a database with the citus extension on its cluster: tenant tables distributed by account, the rest as reference or coordinator tables (migrate does this too)',
    )
    .option('--json', 'JSON output')
    .action(async (opts: { json?: boolean }) => {
      const { distribute, hasCitus } = await import('../../server/core/citus.js');
      const placed = await withServices(loadConfig({ configFile: globals().config }), async (services) => {
        if (!(await hasCitus(services.db))) {
          fail('the database has no citus extension: CREATE EXTENSION citus and add the workers first (docs/operations.md)', opts.json ? { code: 'no_citus' } : undefined);
          throw new ReportedFailure();
        }
        return distribute(services.db);
      });
      emit(Boolean(opts.json), { placed }, () =>
        placed.length ? placed.map((p) => `${p.placement.padEnd(11)} ${p.table}`).concat(`${placed.length} tables placed`) : ['every table is placed already'],
      );
    });

  db.command('rollback')
    .description('undo the last batch of migrations (or all with --all); destroys the data in those tables')
    .option('--all', 'undo every migration')
    .option('--yes', 'do not ask for confirmation')
    .option('--json', 'JSON output')
    .action(async (opts: { all?: boolean; yes?: boolean; json?: boolean }) => {
      if (!(await confirmOrFlag(opts.yes, `Roll back ${opts.all ? 'ALL migrations' : 'the last batch'}? Tables and their data will be dropped.`))) return;
      const { rollback } = await migrations();
      const rolledBack = await withServices(loadConfig({ configFile: globals().config }), (services) => rollback(services.db, Boolean(opts.all)));
      emit(Boolean(opts.json), { rolledBack }, () => (rolledBack.length ? rolledBack.map((m) => `rolled back ${m}`) : ['nothing to roll back']));
    });

  db.command('status')
    .description('list applied and pending migrations')
    .option('--json', 'JSON output')
    .action(async (opts: { json?: boolean }) => {
      const { migrationStatus } = await migrations();
      const status = await withServices(loadConfig({ configFile: globals().config }), (services) => migrationStatus(services.db));
      emit(Boolean(opts.json), status, () => [
        ...status.completed.map((m) => `applied  ${m}`),
        ...status.pending.map((m) => `pending  ${m}`),
        status.pending.length ? `${status.pending.length} pending` : 'up to date',
      ]);
    });

  db.command('backup <file>')
    .description('write the database (and with --with-files the attachments, avatars and mail under the data directory) to FILE, one archive')
    .option('--with-files', "include the files ticketd keeps under its data directory; on object storage, the list of the bucket's objects")
    .option('--copy-objects', "on object storage, with --with-files: the bucket's objects themselves too")
    .option('--yes', 'replace FILE if it exists')
    .option('--json', 'JSON output')
    .addHelpText(
      'after',
      `
FILE is a gzipped tar with a manifest (checksums of everything in it): see \`db verify\`.
The embedded database is copied online with PostgreSQL's own backup functions (pg_backup_start,
pg_backup_stop) and the WAL written meanwhile: nothing else needs installing. An external one
(DATABASE_URL) is dumped with pg_dump of the server's major version or newer: on PATH, or in
/usr/lib/postgresql/*/bin. Files are copied after the database. On object storage (storage.kind
s3) the attachments and avatars are the bucket's objects: --with-files lists them (key and size),
and --copy-objects copies their bytes into FILE as well. See docs/operations.md.`,
    )
    .action(async (file: string, opts: { withFiles?: boolean; copyObjects?: boolean; yes?: boolean; json?: boolean }) => {
      const config = loadConfig({ configFile: globals().config });
      const onBucket = config.storage.kind === 's3';
      if (opts.copyObjects && !opts.withFiles) throw new UsageError('--copy-objects goes with --with-files');
      if (opts.copyObjects && !onBucket) throw new UsageError('--copy-objects is for object storage (storage.kind s3); --with-files copies the files of local storage');
      const [{ embeddedClusterExists }, { writeBackup }] = await Promise.all([import('../../server/integrations/embedded-postgres.js'), backups()]);
      if (!config.databaseUrl && !embeddedClusterExists(config.dataDir)) throw new Error(`no embedded database under ${config.dataDir} yet: nothing to back up`);
      if (!existsSync(path.dirname(path.resolve(file)))) throw new Error(`${path.dirname(path.resolve(file))} does not exist: nowhere to write ${file}`);
      if (existsSync(file) && !(await confirmOrFlag(opts.yes, `${file} exists. Replace it?`))) return;
      const objects = opts.withFiles && onBucket ? { storage: await storageOf(config), copy: Boolean(opts.copyObjects) } : undefined;
      const result = await withDatabase(config, (handle) => writeBackup(handle, { file, dataDir: config.dataDir, withFiles: Boolean(opts.withFiles), objects, log: note }));
      const listed = result.objects ? `, ${result.objects.copied ? 'copying' : 'listing'} ${result.objects.count} objects of the bucket` : '';
      emit(Boolean(opts.json), result, () => [
        `backed up database ${result.database} (PostgreSQL ${result.serverVersion}, ${result.method})${result.withFiles ? ` and ${result.files} files${listed}` : ''} to ${result.file}: ${result.bytes} bytes`,
      ]);
    });

  db.command('verify <file>')
    .description('check a backup without restoring it: its manifest, every checksum, and what a restore needs')
    .option('--json', 'JSON output')
    .action(async (file: string, opts: { json?: boolean }) => {
      const { verifyBackup } = await backups();
      const { manifest: _manifest, ...result } = await verifyBackup(file);
      emit(Boolean(opts.json), result, () =>
        result.ok
          ? [
              `ok: ${result.file}: ${result.kind} backup of PostgreSQL ${result.serverVersion}, made ${result.createdAt}, ${result.members} members${result.withFiles ? ', files included' : ''}`,
            ]
          : [`${result.file} is not a usable backup:`, ...result.problems.map((p) => `  ${p}`)],
      );
      if (!result.ok) throw new ReportedFailure();
    });

  db.command('restore <file>')
    .description('restore a backup made by `db backup`: the embedded database into the data directory, an external one into the configured database')
    .option('--yes', 'replace a database that is not empty')
    .option('--json', 'JSON output')
    .addHelpText(
      'after',
      `
FILE is verified first (see \`db verify\`); nothing is changed when it is damaged.
Embedded (no DATABASE_URL): the copy is unpacked beside the data directory's cluster and started
once there to replay its WAL. An existing cluster is replaced only with --yes and only while no
ticketd process runs it; it is moved to <data dir>/replaced-<time>/, with the attachments and
mail the backup's files replace (delete that directory when satisfied).
External (and a bare pg_dump file of an older ticketd): pg_restore in one transaction. A database
that is not empty is emptied first (schema public dropped and made anew) only with --yes, and
only while nothing else is connected to it.
Start ticketd afterwards: it applies any migration the backup predates.`,
    )
    .action(async (file: string, opts: { yes?: boolean; json?: boolean }) => {
      const config = loadConfig({ configFile: globals().config });
      const { openBackup } = await backups();
      const backup = await openBackup(file);
      const result = backup.kind === 'embedded' ? await restoreEmbeddedCommand(config, backup, opts.yes) : await restoreDumpCommand(config, backup, opts.yes);
      if (!result) return;
      emit(Boolean(opts.json), result, () => [
        `restored ${result.file} into database ${result.database}${result.withFiles ? ', with its files' : ''}`,
        ...(result.objects?.restored ? [`${result.objects.restored} objects put into storage`] : []),
        ...(result.objects?.missing ? [`warning: ${result.objects.missing} objects the backup listed are not in storage (it kept their list only)`] : []),
        ...(result.kind === 'external' && result.replaced ? ['what the database held was dropped first'] : []),
        ...(result.movedAside ? [`what it replaced under the data directory is in ${result.movedAside}`] : []),
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
      const { provisionDatabase } = await import('../../server/core/provision.js');
      const result = await provisionDatabase(adminUrl, { role: opts.roleName, database: opts.databaseName, resetPassword: opts.resetPassword });
      emit(Boolean(opts.json), result, () => [
        `${result.createdRole ? 'created' : 'updated'} role ${result.role}; database ${result.database} ${result.createdDatabase ? 'created' : 'already existed'}`,
        `DATABASE_URL=${result.databaseUrl}`,
      ]);
    });
}

async function restoreEmbeddedCommand(config: Config, backup: Backup, yes: boolean | undefined): Promise<RestoreResult | null> {
  if (config.databaseUrl) {
    throw new Error(
      `${backup.file} is a copy of an embedded database: it restores only as the embedded one (without DATABASE_URL); to move to an external database, restore it embedded, then back up and restore that with DATABASE_URL set`,
    );
  }
  const { embeddedTargetExists, restoreEmbedded } = await backups();
  if (embeddedTargetExists(config.dataDir) && !(await confirmOrFlag(yes, `${config.dataDir} already holds a database. Move it aside and restore ${backup.file}?`))) return null;
  return restoreEmbedded(config.dataDir, backup, { storage: await storageOf(config), log: note });
}

async function restoreDumpCommand(config: Config, backup: Backup, yes: boolean | undefined): Promise<RestoreResult | null> {
  const [{ inspectDatabase }, { restoreDump }] = await Promise.all([import('../../server/integrations/pg-tools.js'), backups()]);
  return withDatabase(config, async (handle) => {
    const target = await inspectDatabase(handle.url);
    const replace = target.relations > 0;
    if (
      replace &&
      !(await confirmOrFlag(yes, `Database ${target.database} is not empty (${target.relations} tables, views and sequences). Drop all of it and restore ${backup.file}?`))
    ) {
      return null;
    }
    return restoreDump(handle, backup, { dataDir: config.dataDir, replace, storage: await storageOf(config), log: note });
  });
}
