/** CPU time of processes on this machine, from /proc (Linux): the server's, and a PostgreSQL cluster's. */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';

const CLOCK_TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** The fields of /proc/<pid>/stat after the command name (which may hold spaces): [0] is field 3 (state), [1] the parent pid, [11]/[12] utime/stime, [13]/[14] cutime/cstime. */
function statFields(pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
}

const ticksToMicros = (ticks: number) => (ticks * 1_000_000) / CLOCK_TICKS_PER_SECOND;

/** User + system CPU time of a process so far, in µs (/proc/<pid>/stat, fields 14 and 15). */
export function cpuMicros(pid: number): number {
  const f = statFields(pid);
  return ticksToMicros(Number(f[11]) + Number(f[12]));
}

/** The parent of a process, or null when there is no such process here. */
function parentOf(pid: number): number | null {
  try {
    return Number(statFields(pid)[1]);
  } catch {
    return null;
  }
}

export interface Cluster {
  postmasterPid: number;
  /** How it was found, for the report. */
  how: string;
}

/**
 * The PostgreSQL cluster behind `databaseUrl`, when it runs on this machine: every server process
 * is a child of the postmaster, so the postmaster is the parent of a backend's pid. Null when the
 * backend is not a process here (a remote server, another pid namespace).
 */
export async function findCluster(databaseUrl: string): Promise<Cluster | null> {
  // The connection stays open while its backend is looked up: closed, the backend is gone.
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  let backend: number;
  let postmaster: number | null;
  try {
    backend = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    postmaster = parentOf(backend);
  } finally {
    await c.end();
  }
  if (!postmaster) return null;
  const name = (pid: number) => readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  // Another machine's pid that happens to exist here would not be a postgres with a postgres parent.
  if (!name(postmaster).startsWith('postgres')) return null;
  return { postmasterPid: postmaster, how: `the postmaster (pid ${postmaster}, the parent of backend ${backend}) and its children: all of that cluster, whatever else runs on it` };
}

/**
 * CPU time of the whole cluster so far, in µs: the postmaster's own and that of its children that
 * ended (cutime/cstime: the postmaster reaps them, so a backend or autovacuum worker that exits
 * between two readings keeps its CPU in the total), plus every live child's.
 */
export function clusterCpuMicros(cluster: Cluster): number {
  const f = statFields(cluster.postmasterPid);
  let ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const child = statFields(Number(entry));
      if (Number(child[1]) === cluster.postmasterPid) ticks += Number(child[11]) + Number(child[12]);
    } catch {
      // Gone since the listing: its time is in the postmaster's cutime now, or will be once reaped.
    }
  }
  return ticksToMicros(ticks);
}

/** A process's resident memory now, in MiB (/proc/<pid>/status, VmRSS). */
export function rssMiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(line?.split(/\s+/)[1] ?? 0) / 1024;
}
