import type { Command } from 'commander';
import { ConfigError, loadConfig, type Config } from '../../server/core/config.js';
import { databaseClock, diskSpace, type DatabaseClock } from '../../server/core/diagnostics.js';
import { adminCtx } from '../context.js';
import { withServices } from '../database.js';
import { emit, ReportedFailure } from '../io.js';
import type { GlobalOptions } from '../globals.js';
import type { Services } from '../../server/core/services.js';
import { S3Storage } from '../../server/integrations/s3-storage.js';
import { storageFromConfig } from '../../server/integrations/storage-from-config.js';
import { scannerFromConfig } from '../../server/integrations/clamd.js';

type Status = 'ok' | 'warn' | 'fail' | 'skip';

interface Check {
  name: string;
  status: Status;
  message: string;
  details?: Record<string, unknown>;
}

/** A message older than this while a dispatcher should be running means none is. */
const OUTBOX_AGE_WARN_SECONDS = 300;
/** Leases, retry times and signed URLs mix both clocks: seconds apart already shift them. */
const CLOCK_WARN_MS = 2_000;
const CLOCK_FAIL_MS = 60_000;
const MiB = 1024 * 1024;
const DISK_FAIL_BYTES = 100 * MiB;
const DISK_WARN_BYTES = 1024 * MiB;
const DISK_WARN_SHARE = 0.1;

const DATABASE_CHECKS = ['database', 'migrations', 'clock', 'outbox', 'deadDeliveries', 'cluster'] as const;

function bytes(n: number): string {
  return n >= 1024 * MiB ? `${(n / (1024 * MiB)).toFixed(1)} GiB` : `${Math.round(n / MiB)} MiB`;
}

const isLoopback = (host: string) => host === 'localhost' || host === '::1' || host.startsWith('127.');

function checkConfig(configFile: string | undefined): { check: Check; config: Config | null } {
  let config: Config;
  try {
    config = loadConfig({ configFile });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return { check: { name: 'config', status: 'fail', message: err.problems.join('; '), details: { problems: err.problems } }, config: null };
  }
  if (!isLoopback(config.host) && !config.publicUrl) {
    const message = `listening on ${config.host} without publicUrl: links in mail and attachment URLs will name localhost; set TICKETD_PUBLIC_URL`;
    return { check: { name: 'config', status: 'warn', message }, config };
  }
  return { check: { name: 'config', status: 'ok', message: 'valid' }, config };
}

async function checkDisk(config: Config): Promise<Check> {
  const disk = await diskSpace(config.dataDir);
  const share = disk.totalBytes ? disk.freeBytes / disk.totalBytes : 0;
  const where = `${bytes(disk.freeBytes)} free of ${bytes(disk.totalBytes)} (${Math.round(share * 100)}%) at ${disk.path}`;
  const details = { ...disk };
  if (!disk.writable) return { name: 'disk', status: 'fail', message: `${where}, which this user cannot write to`, details };
  if (disk.freeBytes < DISK_FAIL_BYTES) return { name: 'disk', status: 'fail', message: `${where}: attachments and the database need room`, details };
  if (disk.freeBytes < DISK_WARN_BYTES || share < DISK_WARN_SHARE) return { name: 'disk', status: 'warn', message: `${where}: running low`, details };
  return { name: 'disk', status: 'ok', message: where, details };
}

function checkClock(clock: DatabaseClock): Check {
  const skew = Math.abs(clock.skewMs);
  const status: Status = skew > CLOCK_FAIL_MS ? 'fail' : skew > CLOCK_WARN_MS ? 'warn' : 'ok';
  const message = `PostgreSQL's clock is ${skew} ms ${clock.skewMs >= 0 ? 'ahead of' : 'behind'} this host's (±${Math.ceil(clock.roundTripMs / 2)} ms)${status === 'ok' ? '' : ': synchronise both clocks (NTP)'}`;
  return { name: 'clock', status, message, details: { skewMs: clock.skewMs, roundTripMs: clock.roundTripMs } };
}

/** S3 refuses a request signed this far from its own clock; signed links drift by the skew too. */
const BUCKET_SKEW_FAIL_MS = 15 * 60_000;
const BUCKET_SKEW_WARN_MS = 5_000;

/** Where the files live: local disk (the disk check covers it), or a bucket written, read and cleared once. */
async function checkStorage(config: Config): Promise<Check> {
  const storage = storageFromConfig(config);
  if (!(storage instanceof S3Storage)) return { name: 'storage', status: 'ok', message: `local disk, under ${config.dataDir}` };
  const { bucket, prefix, endpoint } = config.storage;
  const where = `bucket ${bucket}${prefix ? ` (${prefix})` : ''} at ${endpoint ?? `AWS ${config.storage.region}`}`;
  try {
    const { skewMs, roundTripMs } = await storage.probe();
    const skew = Math.abs(skewMs);
    const status: Status = skew > BUCKET_SKEW_FAIL_MS ? 'fail' : skew > BUCKET_SKEW_WARN_MS ? 'warn' : 'ok';
    const clock = `its clock ${Math.round(skew / 1000)} s ${skewMs >= 0 ? 'ahead of' : 'behind'} this host's`;
    return {
      name: 'storage',
      status,
      message: `${where}: reachable and writable, ${clock}${status === 'ok' ? '' : ': synchronise both clocks (NTP)'}`,
      details: { skewMs, roundTripMs },
    };
  } catch (err) {
    return { name: 'storage', status: 'fail', message: `${where}: ${(err as Error).name}: ${(err as Error).message}` };
  } finally {
    await storage.destroy();
  }
}

/** The virus scanner, when one is configured: it must answer PING (a failure under scanFailure allow is a warning: uploads go on, unscanned). */
async function checkScanner(config: Config): Promise<Check> {
  const scanner = scannerFromConfig(config);
  if (!scanner) return { name: 'scanner', status: 'ok', message: 'off (no scanning.clamdSocket or clamdHost): uploads are kept not_scanned' };
  const { clamdSocket, clamdHost, clamdPort, scanFailure } = config.scanning;
  const where = `clamd at ${clamdSocket ?? `${clamdHost}:${clamdPort}`}`;
  const started = performance.now();
  try {
    await scanner.ping();
    const roundTripMs = Math.round(performance.now() - started);
    return { name: 'scanner', status: 'ok', message: `${where}: answers PING (${roundTripMs} ms)`, details: { roundTripMs, scanFailure } };
  } catch (err) {
    const then = scanFailure === 'allow' ? 'uploads are kept unscanned meanwhile' : 'uploads are refused (503) meanwhile';
    return { name: 'scanner', status: scanFailure === 'allow' ? 'warn' : 'fail', message: `${where}: ${(err as Error).message}; ${then}`, details: { scanFailure } };
  }
}

function describeDatabase(config: Config): string {
  if (!config.databaseUrl) return `embedded, under ${config.dataDir}`;
  const url = new URL(config.databaseUrl);
  return `external, ${url.host}${url.pathname}`;
}

const failed =
  (name: string) =>
  (err: Error): Check => ({ name, status: 'fail', message: err.message });

async function migrationsCheck(services: Services): Promise<Check> {
  const { migrationStatus } = await import('../../server/core/migrate.js');
  const { completed, pending } = await migrationStatus(services.db);
  const details = { applied: completed.length, pending };
  if (!pending.length) return { name: 'migrations', status: 'ok', message: `${completed.length} applied, none pending`, details };
  const message = `${pending.length} pending (${pending.join(', ')}): run \`ticketd db migrate\` (\`ticketd start\` migrates too)`;
  return { name: 'migrations', status: 'fail', message, details };
}

async function outboxChecks(services: Services): Promise<Check[]> {
  const outbox = await import('../../server/core/outbox/service.js');
  const stats = await outbox.stats(adminCtx(services));
  const count = (statuses: string[]) => stats.counts.filter((c) => statuses.includes(c.status)).reduce((sum, c) => sum + c.count, 0);
  const backlog = count(['pending', 'retrying']);
  const age = stats.oldestPendingAgeSeconds;
  const stuck = age !== null && age > OUTBOX_AGE_WARN_SECONDS;
  const dead = count(['dead']);
  return [
    {
      name: 'outbox',
      status: stuck ? 'warn' : 'ok',
      message: backlog ? `${backlog} to deliver, the oldest ${age} s old${stuck ? ': is a dispatcher running?' : ''}` : 'nothing waiting',
      details: { backlog, oldestPendingAgeSeconds: age },
    },
    {
      name: 'deadDeliveries',
      status: dead ? 'warn' : 'ok',
      message: dead ? `${dead} ran out of attempts: \`ticketd outbox list --status dead\`, then \`ticketd outbox retry ID\`` : 'none',
      details: { dead },
    },
  ];
}

/** On a Citus coordinator: its nodes, where the tables are, and no setting that lets unsafe triggers in. */
async function clusterCheck(services: Services): Promise<Check> {
  const { clusterReport } = await import('../../server/core/citus.js');
  const report = await clusterReport(services.db);
  if (!report) return { name: 'cluster', status: 'ok', message: 'one PostgreSQL server (no citus extension)' };
  const workers = report.nodes.filter((n) => n.role === 'worker');
  const inactive = report.nodes.filter((n) => !n.active).map((n) => `${n.name}:${n.port}`);
  const { distributed, reference, coordinator } = report.tables;
  const shape = `Citus: ${workers.length} workers (${workers.map((n) => `${n.name}:${n.port} ${n.shards} shards`).join(', ') || 'none'}); tables: ${distributed} distributed by account, ${reference} reference, ${coordinator} on the coordinator`;
  const details = { ...report };
  if (report.misplaced.length) {
    return { name: 'cluster', status: 'fail', message: `${shape}; not placed as they should be: ${report.misplaced.join(', ')} (run \`ticketd db distribute\`)`, details };
  }
  const problems = [
    ...(workers.length ? [] : ['no worker node: every shard is on the coordinator']),
    ...(inactive.length ? [`inactive nodes: ${inactive.join(', ')}`] : []),
    ...(report.unsafeTriggers ? ['citus.enable_unsafe_triggers is on: ticketd needs no trigger on a distributed table'] : []),
  ];
  return { name: 'cluster', status: problems.length ? 'warn' : 'ok', message: problems.length ? `${shape}; ${problems.join('; ')}` : shape, details };
}

/** The checks that need the database; those it could not get to are skipped. */
async function databaseChecks(config: Config): Promise<Check[]> {
  const checks: Check[] = [];
  const where = describeDatabase(config);
  const { embeddedClusterExists } = await import('../../server/integrations/embedded-postgres.js');
  if (!config.databaseUrl && !embeddedClusterExists(config.dataDir)) {
    checks.push({ name: 'database', status: 'fail', message: `no embedded database under ${config.dataDir} yet: run \`ticketd init\` or \`ticketd start\`` });
  } else {
    // Only opening the database and the first query may throw here: every later check reports its own failure.
    await withServices(config, async (services) => {
      const clock = await databaseClock(services.db);
      checks.push({
        name: 'database',
        status: 'ok',
        message: `PostgreSQL ${clock.serverVersion} (${where})`,
        details: { serverVersion: clock.serverVersion, embedded: !config.databaseUrl },
      });
      const migrations = await migrationsCheck(services).catch(failed('migrations'));
      checks.push(migrations, checkClock(clock));
      if (migrations.status === 'ok') {
        checks.push(...(await outboxChecks(services).catch((err: Error) => [failed('outbox')(err), failed('deadDeliveries')(err)])));
        checks.push(await clusterCheck(services).catch(failed('cluster')));
      }
    }).catch((err: Error) => {
      if (!checks.length) checks.push({ name: 'database', status: 'fail', message: `unreachable (${where}): ${err.message}` });
    });
  }
  const why = checks[0]!.status === 'fail' ? 'the database is not reachable' : 'migrations are not in order';
  const skipped = DATABASE_CHECKS.filter((name) => !checks.some((c) => c.name === name));
  return [...checks, ...skipped.map((name): Check => ({ name, status: 'skip', message: `not checked: ${why}` }))];
}

function overall(checks: Check[]): Status {
  if (checks.some((c) => c.status === 'fail')) return 'fail';
  return checks.some((c) => c.status === 'warn') ? 'warn' : 'ok';
}

export function registerDoctor(program: Command, globals: () => GlobalOptions): void {
  program
    .command('doctor')
    .description('check this installation: config, database reachable and migrated, clock, outbox backlog, dead deliveries, disk space, the storage bucket, the virus scanner')
    .option('--json', 'JSON output: { status, checks: [{ name, status, message, details }] }')
    .addHelpText(
      'after',
      `
Each check is ok, warn, fail or skip (not run because one it depends on failed).
Exit code: 1 when a check fails, 0 otherwise (warnings alone exit 0). Changes nothing; an embedded
database that is not running is started for the duration of the checks. See docs/operations.md.`,
    )
    .action(async (opts: { json?: boolean }) => {
      const { check, config } = checkConfig(globals().config);
      const checks = [check];
      if (config) checks.push(...(await databaseChecks(config)), await checkDisk(config), await checkStorage(config), await checkScanner(config));
      else
        checks.push(...[...DATABASE_CHECKS, 'disk', 'storage', 'scanner'].map((name): Check => ({ name, status: 'skip', message: 'not checked: the configuration is invalid' })));
      const status = overall(checks);
      emit(Boolean(opts.json), { status, checks }, () => {
        const failed = checks.filter((c) => c.status === 'fail').length;
        const warned = checks.filter((c) => c.status === 'warn').length;
        const width = Math.max(...checks.map((c) => c.name.length));
        return [...checks.map((c) => `${c.status.padEnd(5)} ${c.name.padEnd(width)}  ${c.message}`), status === 'ok' ? 'all checks passed' : `${failed} failed, ${warned} warned`];
      });
      if (status === 'fail') throw new ReportedFailure();
    });
}
