import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { packageRoot } from '../../server/core/paths.js';

/**
 * A real Request Tracker 5 for importer tests: Debian's packages, started by the shared tool's
 * rt5-up.sh (../shared/tools/rt5 beside the repository, or TICKETD_RT5_TOOLS). Its database is
 * shared between runs: a test makes its own uniquely named queue, users and tickets.
 */

const PACKAGES = ['request-tracker5', 'rt5-db-postgresql', 'rt5-standalone'];
const RT_LIB = '/usr/share/request-tracker5/lib';

export const rt5Tools = (): string => process.env.TICKETD_RT5_TOOLS ?? path.resolve(packageRoot, '..', 'shared', 'tools', 'rt5');

/** Why a test needing RT is skipped here, or false when it can run. rt5-up.sh would install missing packages: it is only run when they are there. */
export function noRt5(): string | false {
  try {
    execFileSync('dpkg', ['-s', ...PACKAGES], { stdio: 'ignore' });
  } catch {
    return `Request Tracker 5 is not installed (apt-get install ${PACKAGES.join(' ')})`;
  }
  if (!existsSync(path.join(rt5Tools(), 'rt5-up.sh'))) return `the RT tool kit is not at ${rt5Tools()} (set TICKETD_RT5_TOOLS)`;
  // It writes RT's configuration for www-data and runs PostgreSQL's tools as postgres.
  if (process.getuid?.() !== 0) return "the RT tool kit's rt5-up.sh runs as root only";
  return false;
}

export interface Rt5 {
  /** REST2's base, http://127.0.0.1:PORT/REST/2.0 */
  url: string;
  token: string;
  /** A REST2 call as root (token), or as `as` (basic auth); the answer's JSON, a non-2xx throws. */
  call(method: string, pathname: string, body?: unknown, as?: { user: string; password: string }): Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** Grants rights on a queue to everyone (REST2 has no rights interface): through RT's own API, as rt5-up.sh makes its token. */
  grantEveryone(queue: string, rights: string[]): Promise<void>;
}

const run = promisify(execFile);

/** RT up (started when it is not), with root's REST2 token. */
export async function startRt5(): Promise<Rt5> {
  const tools = rt5Tools();
  const { stdout } = await run('bash', [path.join(tools, 'rt5-up.sh')], { maxBuffer: 1 << 20 });
  const url = /^RT_URL=(\S+)$/m.exec(stdout)?.[1];
  const token = /^AUTH_HEADER='Authorization: token (\S+)'$/m.exec(stdout)?.[1];
  if (!url || !token) throw new Error(`rt5-up.sh did not print RT_URL and AUTH_HEADER:\n${stdout}`);
  const call: Rt5['call'] = async (method, pathname, body, as) => {
    const res = await fetch(`${url}/${pathname.replace(/^\//, '')}`, {
      method,
      headers: {
        authorization: as ? `Basic ${Buffer.from(`${as.user}:${as.password}`).toString('base64')}` : `token ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`RT ${method} ${pathname}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
  const grantEveryone: Rt5['grantEveryone'] = async (queue, rights) => {
    const perl = `use RT; RT::LoadConfig(); RT::Init();
      my ($name, @rights) = @ARGV;
      my $q = RT::Queue->new(RT->SystemUser); $q->Load($name) or die "no queue $name";
      my $everyone = RT::Group->new(RT->SystemUser); $everyone->LoadSystemInternalGroup('Everyone');
      for my $right (@rights) { my ($ok, $msg) = $everyone->PrincipalObj->GrantRight(Right => $right, Object => $q); $ok or die $msg }`;
    const script = `source "$1/env.sh" && shift && RT_SITE_CONFIG="$RT_STATE/RT_SiteConfig.pm" RT_SITE_CONFIG_DIR="$RT_STATE/RT_SiteConfig.d" perl -I${RT_LIB} -e "$@"`;
    await run('bash', ['-c', script, 'grant', tools, perl, queue, ...rights]);
  };
  return { url, token, call, grantEveryone };
}
