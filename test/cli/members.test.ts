import t from 'tap';
import { buildApp } from '../../server/app.js';
import { client, testConfig } from '../helpers/app.js';
import { runCli } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { testNow } from '../helpers/clock.js';

// `ticketd members login-link`: a sign-in link for servers that send no mail, through the real binary.
const { url, db } = await freshDatabase(t);
const env = { DATABASE_URL: url, TICKETD_DASHBOARD_ORIGINS: 'https://dash.example.com' };
const app = await buildApp({ clock: testNow, config: testConfig(env), db });
t.teardown(() => app.close());

const created = await runCli(['accounts', 'create', '--email', 'Ops@Example.com', '--account-name', 'Ops', '--json'], env);
t.equal(created.code, 0, 'an account to sign in to', { stderr: created.stderr });
const accountId: string = created.json().account.id;

t.test('prints a link to the dashboard that signs the member in, once', async (t) => {
  const res = await runCli(['members', 'login-link', 'ops@example.com', '--origin', 'https://dash.example.com', '--json'], env);
  t.equal(res.code, 0, 'exit 0', { stderr: res.stderr });
  const link = res.json();
  t.match(link, { email: 'ops@example.com', memberId: /^mem_/, organizationId: accountId, expiresAt: String });
  const parsed = new URL(link.url);
  t.equal(parsed.origin, 'https://dash.example.com');
  t.equal(parsed.pathname, '/auth/callback');
  const token = parsed.searchParams.get('token')!;
  const verified = await client(app)('POST', '/v1/auth/verify', { token });
  t.equal(verified.status, 200);
  t.match(verified.body, { memberId: link.memberId, organizationId: accountId, orgRole: 'owner' });
  t.equal((await client(app)('POST', '/v1/auth/verify', { token })).status, 400, 'once');

  const human = await runCli(['members', 'login-link', 'ops@example.com', '--origin', 'http://localhost:5173', '--account', accountId], env);
  t.equal(human.code, 0);
  t.match(human.stdout, /^http:\/\/localhost:5173\/auth\/callback\?token=ml_\w+$/m, 'the link on a line of its own; loopback allowed');
});

t.test('usage errors and failures', async (t) => {
  const noOrigin = await runCli(['members', 'login-link', 'ops@example.com'], env);
  t.equal(noOrigin.code, 2, 'no --origin: usage error');
  t.match(noOrigin.stderr, /--origin/);
  const foreign = await runCli(['members', 'login-link', 'ops@example.com', '--origin', 'https://evil.example'], env);
  t.equal(foreign.code, 2, 'an origin that is not a dashboard origin');
  t.match(foreign.stderr, /TICKETD_DASHBOARD_ORIGINS/);
  const path = await runCli(['members', 'login-link', 'ops@example.com', '--origin', 'https://dash.example.com/login'], env);
  t.equal(path.code, 2, 'an origin with a path');
  const stranger = await runCli(['members', 'login-link', 'nobody@example.com', '--origin', 'https://dash.example.com', '--json'], env);
  t.equal(stranger.code, 1, 'not a member: failure');
  t.match(stranger.json(), { error: { code: 'member_not_found' } });
  // The first link was spent and cleared when the second was made; the failures made none.
  t.same(
    (await db('magic_links').select('usedAt')).map((r: { usedAt: Date | null }) => r.usedAt),
    [null],
    'one link left: the unspent one printed above',
  );
});
