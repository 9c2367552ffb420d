import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ConfigError, dispatcherPoolShare, listenUrl, loadConfig, publicBaseUrl } from '../../server/core/config.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-config-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

t.test('defaults: port 3000, loopback, embedded database under ./data', async (t) => {
  const config = loadConfig({ env: {}, cwd: dir });
  t.equal(config.port, 3000);
  t.equal(config.host, '127.0.0.1');
  t.equal(config.databaseUrl, null);
  t.equal(config.dataDir, path.join(dir, 'data'), 'the data dir is resolved against the working directory');
  t.equal(config.signup, 'open');
  t.ok(Object.isFrozen(config) && Object.isFrozen(config.bootstrap), 'frozen after load');
});

t.test('environment overrides the file, which overrides the defaults', async (t) => {
  const file = path.join(dir, 'layered.json');
  writeFileSync(file, JSON.stringify({ port: 4000, logLevel: 'warn', bootstrap: { brandName: 'From File' } }));
  const config = loadConfig({ env: { PORT: '5000', TICKETD_CORS_ORIGINS: 'https://a.example, https://b.example', TICKETD_TRUST_PROXY: 'true' }, configFile: file, cwd: dir });
  t.equal(config.port, 5000, 'env beats file');
  t.equal(config.logLevel, 'warn', 'file beats default');
  t.same(config.corsOrigins, ['https://a.example', 'https://b.example']);
  t.equal(config.trustProxy, true);
  t.equal(config.bootstrap.brandName, 'From File');
  t.equal(config.bootstrap.ownerEmail, 'owner@example.com', 'nested defaults survive a partial file');
});

t.test('a section given in part (storage, stripe) keeps its own defaults, and only its own; S3 needs its bucket', async (t) => {
  const file = path.join(dir, 'sections.json');
  writeFileSync(file, JSON.stringify({ storage: { kind: 's3', bucket: 'tickets-files' }, stripe: { apiUrl: 'http://127.0.0.1:12111' } }));
  const config = loadConfig({ env: { TICKETD_S3_ENDPOINT: 'http://127.0.0.1:9000' }, configFile: file, cwd: dir });
  t.match(config.storage, {
    kind: 's3',
    bucket: 'tickets-files',
    prefix: '',
    region: 'us-east-1',
    forcePathStyle: false,
    endpoint: 'http://127.0.0.1:9000',
    presignedDownloads: false,
  });
  t.same(config.stripe, { secretKey: null, webhookSecret: null, apiUrl: 'http://127.0.0.1:12111' }, "stripe keeps its keys and no other section's");
  writeFileSync(file, JSON.stringify({ storage: { kind: 's3' } }));
  t.throws(() => loadConfig({ env: {}, configFile: file, cwd: dir }), /storage\.bucket/, 'kind s3 without a bucket');
});

t.test('scanning: off by default; a partial section keeps its defaults; clamd is reached one way; bad values named', async (t) => {
  t.same(loadConfig({ env: {}, cwd: dir }).scanning, { clamdSocket: null, clamdHost: null, clamdPort: 3310, timeoutMs: 30000, scanFailure: 'refuse' });
  const file = path.join(dir, 'scanning.json');
  writeFileSync(file, JSON.stringify({ scanning: { clamdHost: 'av.internal' } }));
  t.same(loadConfig({ env: { TICKETD_CLAMD_PORT: '3311', TICKETD_SCAN_FAILURE: 'allow' }, configFile: file, cwd: dir }).scanning, {
    clamdSocket: null,
    clamdHost: 'av.internal',
    clamdPort: 3311,
    timeoutMs: 30000,
    scanFailure: 'allow',
  });
  t.throws(
    () => loadConfig({ env: { TICKETD_CLAMD_SOCKET: '/run/clamav/clamd.ctl' }, configFile: file, cwd: dir }),
    /clamdSocket \(TICKETD_CLAMD_SOCKET\) or clamdHost \(TICKETD_CLAMD_HOST\), not both/,
  );
  t.throws(
    () => loadConfig({ env: { TICKETD_SCAN_FAILURE: 'ignore', TICKETD_CLAMD_TIMEOUT_MS: '10' }, cwd: dir }),
    /scanning\.scanFailure \(TICKETD_SCAN_FAILURE\)[\s\S]*scanning\.timeoutMs \(TICKETD_CLAMD_TIMEOUT_MS\)|scanning\.timeoutMs \(TICKETD_CLAMD_TIMEOUT_MS\)[\s\S]*scanning\.scanFailure \(TICKETD_SCAN_FAILURE\)/,
  );
});

t.test('ticketd.config.json in the working directory is read when present; TICKETD_CONFIG names another', async (t) => {
  const own = mkdtempSync(path.join(os.tmpdir(), 'ticketd-config-'));
  t.teardown(() => rmSync(own, { recursive: true, force: true }));
  writeFileSync(path.join(own, 'ticketd.config.json'), JSON.stringify({ port: 4444 }));
  t.equal(loadConfig({ env: {}, cwd: own }).port, 4444);
  const other = path.join(own, 'other.json');
  writeFileSync(other, JSON.stringify({ port: 5555 }));
  t.equal(loadConfig({ env: { TICKETD_CONFIG: other }, cwd: own }).port, 5555);
});

t.test('every problem is listed at once, naming the setting and its variable', async (t) => {
  const file = path.join(dir, 'bad.json');
  writeFileSync(file, JSON.stringify({ unknownKey: 1, dbPoolMax: 0 }));
  const err = t.throws(() => loadConfig({ env: { PORT: 'abc', TICKETD_LOG_LEVEL: 'loud', DATABASE_URL: 'mysql://x' }, configFile: file, cwd: dir })) as ConfigError;
  t.ok(err instanceof ConfigError);
  const text = err.problems.join('\n');
  t.match(text, /port \(PORT\): must be integer/);
  t.match(text, /logLevel \(TICKETD_LOG_LEVEL\)/);
  t.match(text, /databaseUrl \(DATABASE_URL\)/);
  t.match(text, /unknownKey/);
  t.match(text, /dbPoolMax/);
  t.equal(err.problems.length, 5);
});

t.test("role all: the dispatcher's pool is a share of dbPoolMax, the API keeping the rest", async (t) => {
  const share = (env: Record<string, string>) => dispatcherPoolShare(loadConfig({ env, cwd: dir }));
  t.equal(loadConfig({ env: {}, cwd: dir }).dispatcherDbPoolMax, null);
  t.equal(share({}), 3, 'a quarter of the default 10');
  t.equal(share({ TICKETD_DB_POOL_MAX: '20' }), 5);
  t.equal(share({ TICKETD_DB_POOL_MAX: '4' }), 2, 'at least 2');
  t.equal(share({ TICKETD_DB_POOL_MAX: '2' }), 1, 'the API keeps one');
  t.equal(share({ TICKETD_DB_POOL_MAX: '1' }), 0, 'nothing to split: one pool');
  t.equal(share({ TICKETD_DISPATCHER_DB_POOL_MAX: '6' }), 6, 'as configured');
  t.equal(share({ TICKETD_DISPATCHER_DB_POOL_MAX: '0' }), 0, '0: one shared pool');
  t.throws(() => loadConfig({ env: { TICKETD_DISPATCHER_DB_POOL_MAX: '10' }, cwd: dir }), /dispatcherDbPoolMax \(TICKETD_DISPATCHER_DB_POOL_MAX\): 10 leaves the API none/);
  t.throws(() => loadConfig({ env: { TICKETD_DISPATCHER_DB_POOL_MAX: '-1' }, cwd: dir }), /dispatcherDbPoolMax/);
});

t.test('a missing or unparseable config file is an error', async (t) => {
  t.throws(() => loadConfig({ env: {}, configFile: path.join(dir, 'absent.json'), cwd: dir }), /config file not found/);
  const broken = path.join(dir, 'broken.json');
  writeFileSync(broken, '{ "port": ');
  t.throws(() => loadConfig({ env: {}, configFile: broken, cwd: dir }), /broken.json/);
  const array = path.join(dir, 'array.json');
  writeFileSync(array, '[1]');
  t.throws(() => loadConfig({ env: {}, configFile: array, cwd: dir }), /must contain a JSON object/);
});

t.test('public base URL: configured, or built from host and port', async (t) => {
  t.equal(publicBaseUrl(loadConfig({ env: { TICKETD_PUBLIC_URL: 'https://help.example.com/' }, cwd: dir })), 'https://help.example.com');
  t.equal(publicBaseUrl(loadConfig({ env: { TICKETD_HOST: '0.0.0.0', PORT: '8080' }, cwd: dir })), 'http://localhost:8080');
  t.equal(publicBaseUrl(loadConfig({ env: {}, cwd: dir }), 4321), 'http://127.0.0.1:4321');
});

t.test("the dispatcher's per-account share and the outbox retention: defaults, environment, bounds", async (t) => {
  const defaults = loadConfig({ env: {}, cwd: dir });
  t.equal(defaults.dispatcherAccountConcurrency, 8);
  t.equal(defaults.outboxRetentionDays, 30);
  t.equal(defaults.rawMailRetentionDays, 30);
  t.equal(loadConfig({ env: { TICKETD_RAW_MAIL_RETENTION_DAYS: '0' }, cwd: dir }).rawMailRetentionDays, 0, 'raw mail may be not kept at all');
  const set = loadConfig({ env: { TICKETD_DISPATCHER_ACCOUNT_CONCURRENCY: '3', TICKETD_OUTBOX_RETENTION_DAYS: '90' }, cwd: dir });
  t.equal(set.dispatcherAccountConcurrency, 3);
  t.equal(set.outboxRetentionDays, 90);
  const err = t.throws(() => loadConfig({ env: { TICKETD_DISPATCHER_ACCOUNT_CONCURRENCY: '0', TICKETD_OUTBOX_RETENTION_DAYS: '0' }, cwd: dir })) as ConfigError;
  t.match(err.problems.join('\n'), /dispatcherAccountConcurrency \(TICKETD_DISPATCHER_ACCOUNT_CONCURRENCY\): must be >= 1/);
  t.match(err.problems.join('\n'), /outboxRetentionDays \(TICKETD_OUTBOX_RETENTION_DAYS\): must be >= 1/);
});

t.test("a dispatcher's own health and metrics listener: on loopback port 3001 by default, moved or turned off", async (t) => {
  const defaults = loadConfig({ env: {}, cwd: dir });
  t.same([defaults.dispatcherHost, defaults.dispatcherPort], ['127.0.0.1', 3001]);
  const set = loadConfig({ env: { TICKETD_DISPATCHER_HOST: '0.0.0.0', TICKETD_DISPATCHER_PORT: '9464' }, cwd: dir });
  t.same([set.dispatcherHost, set.dispatcherPort], ['0.0.0.0', 9464]);
  t.equal(loadConfig({ env: { TICKETD_DISPATCHER_PORT: 'off' }, cwd: dir }).dispatcherPort, null, 'off: no listener');
  t.equal(loadConfig({ env: { TICKETD_DISPATCHER_PORT: '0' }, cwd: dir }).dispatcherPort, 0, 'a free port');
  const file = path.join(dir, 'no-dispatcher-port.json');
  writeFileSync(file, JSON.stringify({ dispatcherPort: null }));
  t.equal(loadConfig({ env: {}, configFile: file, cwd: dir }).dispatcherPort, null, 'null in a file');
  for (const [value, problem] of [
    ['70000', /dispatcherPort \(TICKETD_DISPATCHER_PORT\): must be <= 65535/],
    ['none', /dispatcherPort \(TICKETD_DISPATCHER_PORT\): must be integer,null/],
  ] as const) {
    const err = t.throws(() => loadConfig({ env: { TICKETD_DISPATCHER_PORT: value }, cwd: dir })) as ConfigError;
    t.match(err.problems.join('\n'), problem, value);
  }
  t.equal(listenUrl(set.dispatcherHost, 9464), 'http://localhost:9464', 'any address is reached as localhost');
});

t.test('rate limits: defaults, set from the environment, and checked', async (t) => {
  const defaults = loadConfig({ env: {}, cwd: dir });
  t.same(
    [defaults.rateLimitWindowSeconds, defaults.rateLimitPerApiKey, defaults.rateLimitPerIp, defaults.rateLimitSyncMs],
    [60, 6000, 600, 250],
    'a minute; 6,000 per key, 600 per address; synced every 250 ms',
  );
  const set = loadConfig({
    env: { TICKETD_RATE_LIMIT_WINDOW_SECONDS: '10', TICKETD_RATE_LIMIT_PER_API_KEY: '0', TICKETD_RATE_LIMIT_PER_IP: '50', TICKETD_RATE_LIMIT_SYNC_MS: '1000' },
    cwd: dir,
  });
  t.same([set.rateLimitWindowSeconds, set.rateLimitPerApiKey, set.rateLimitPerIp, set.rateLimitSyncMs], [10, 0, 50, 1000]);
  const err = t.throws(() =>
    loadConfig({
      env: { TICKETD_RATE_LIMIT_WINDOW_SECONDS: '0', TICKETD_RATE_LIMIT_PER_API_KEY: '-1', TICKETD_RATE_LIMIT_PER_IP: 'many', TICKETD_RATE_LIMIT_SYNC_MS: '5' },
      cwd: dir,
    }),
  ) as ConfigError;
  t.same(err.problems.map((p) => p.split(':')[0]).sort(), [
    'rateLimitPerApiKey (TICKETD_RATE_LIMIT_PER_API_KEY)',
    'rateLimitPerIp (TICKETD_RATE_LIMIT_PER_IP)',
    'rateLimitSyncMs (TICKETD_RATE_LIMIT_SYNC_MS)',
    'rateLimitWindowSeconds (TICKETD_RATE_LIMIT_WINDOW_SECONDS)',
  ]);
});

t.test('instance administrators and coupons: defaults, environment, and what the schema cannot say', async (t) => {
  const defaults = loadConfig({ env: {}, cwd: dir });
  t.same([defaults.instanceAdmins, defaults.coupons], [[], []], 'none by default');
  t.same(loadConfig({ env: { TICKETD_INSTANCE_ADMINS: 'a@example.com, B@example.com' }, cwd: dir }).instanceAdmins, ['a@example.com', 'B@example.com']);
  t.match(
    (t.throws(() => loadConfig({ env: { TICKETD_INSTANCE_ADMINS: 'not-an-email' }, cwd: dir })) as ConfigError).problems.join('\n'),
    /instanceAdmins\.0: must match format "email"/,
  );

  const file = path.join(dir, 'coupons.json');
  const free = { slug: 'free', name: 'Free', price: 0, currency: 'usd', interval: 'month', ticketsPerPeriod: null, brands: null, members: null, customDomain: false };
  const good = { code: 'HALF', percentOff: 50, maxRedemptions: 10, expiresAt: '2030-01-01T00:00:00Z', plans: ['free'] };
  writeFileSync(file, JSON.stringify({ defaultPlan: 'free', plans: [free], coupons: [good, { code: 'CASH', amountOff: 500, currency: 'usd', maxRedemptions: null }] }));
  t.same(
    loadConfig({ env: {}, configFile: file, cwd: dir }).coupons.map((c) => c.code),
    ['HALF', 'CASH'],
  );

  writeFileSync(
    file,
    JSON.stringify({
      defaultPlan: 'free',
      plans: [free],
      coupons: [
        good,
        { code: 'half', percentOff: 10, maxRedemptions: null },
        { code: 'BOTH', percentOff: 10, amountOff: 100, currency: 'usd', maxRedemptions: null },
        { code: 'NEITHER', maxRedemptions: null },
        { code: 'NOCUR', amountOff: 100, maxRedemptions: null },
        { code: 'GHOST', percentOff: 10, maxRedemptions: null, plans: ['gold'] },
      ],
    }),
  );
  const err = t.throws(() => loadConfig({ env: {}, configFile: file, cwd: dir })) as ConfigError;
  t.same(err.problems, [
    'coupons: the code half is used twice (codes are matched in any case)',
    'coupons: BOTH needs exactly one of percentOff and amountOff',
    'coupons: NEITHER needs exactly one of percentOff and amountOff',
    'coupons: NOCUR gives currency with amountOff, and only then',
    'coupons: GHOST names the plan gold, which is not one of plans',
  ]);

  writeFileSync(file, JSON.stringify({ coupons: [{ code: 'bad code', percentOff: 101, maxRedemptions: -1, expiresAt: 'soon' }] }));
  const schema = t.throws(() => loadConfig({ env: {}, configFile: file, cwd: dir })) as ConfigError;
  t.same(schema.problems.map((p) => p.split(':')[0]).sort(), ['coupons.0.code', 'coupons.0.expiresAt', 'coupons.0.maxRedemptions', 'coupons.0.percentOff']);
});
