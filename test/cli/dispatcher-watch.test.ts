import { networkInterfaces } from 'node:os';
import t from 'tap';
import { buildApp } from '../../server/app.js';
import { makeTicket, ownerWithBrand, testConfig } from '../helpers/app.js';
import { runCli, startServer, type Server } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { receiver } from '../helpers/receiver.js';
import { until } from '../helpers/wait.js';
import { testNow } from '../helpers/clock.js';

// Two `start --role dispatcher` processes of the real bin/ticketd, each serving health and metrics
// on a port of its own: one without a metrics token (on every address, so a client that is not
// loopback can try), one with. The API, in this process, makes the events they deliver.
const { url, db } = await freshDatabase(t);
const env = { DATABASE_URL: url, TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true' };
const TOKEN = 'dispatcher-metrics-token-0123';
/** An address of this machine that is not loopback, if it has one. */
const outside = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && !a.internal && a.family === 'IPv4')?.address;

const servers: Server[] = [
  startServer({ ...env, TICKETD_DISPATCHER_HOST: outside ? '0.0.0.0' : '127.0.0.1' }, ['--role', 'dispatcher']),
  startServer({ ...env, TICKETD_METRICS_TOKEN: TOKEN }, ['--role', 'dispatcher']),
];
t.teardown(async () => {
  for (const s of servers) s.child.kill('SIGKILL');
  await Promise.all(servers.map((s) => s.exited));
});
const started = await Promise.all(servers.map((s) => s.ready));
if (!started.every(Boolean)) throw new Error(`a dispatcher did not start:\n${servers.map((s) => s.stderr()).join('\n')}`);
/** Each dispatcher's listener on 127.0.0.1 (whatever host its summary names). */
const [open, guarded] = started.map((s) => `http://127.0.0.1:${new URL(s.dispatcherUrl).port}`) as [string, string];

async function get(address: string, headers: Record<string, string> = {}) {
  const res = await fetch(address, { headers });
  const text = await res.text();
  return { status: res.status, type: res.headers.get('content-type') ?? '', text, json: () => JSON.parse(text) };
}

/** The value of the sample `name` whose labels include `labels`, from Prometheus text; undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const line = text.split('\n').find((l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

const delivered = async () => {
  const texts = [(await get(`${open}/metrics`)).text, (await get(`${guarded}/metrics`, { authorization: `Bearer ${TOKEN}` })).text];
  return texts.reduce((sum, text) => sum + (sample(text, 'ticketd_dispatcher_deliveries_total', { kind: 'webhook', outcome: 'delivered' }) ?? 0), 0);
};

t.test('the summary names the listener; live and ready answer in the API health shapes', async (t) => {
  for (const s of started) {
    t.equal(s.role, 'dispatcher');
    t.match(s.dispatcherUrl, /^http:\/\/(127\.0\.0\.1|localhost):\d+$/);
  }
  for (const base of [open, guarded]) {
    t.same((await get(`${base}/health/live`)).json(), { status: 'ok' });
    // Ready once its LISTEN connection is up: a moment after start-up at most.
    await until('readiness', async () => (await get(`${base}/health/ready`)).status === 200);
    t.same((await get(`${base}/health/ready`)).json(), { status: 'ready' });
    t.match((await get(`${base}/health`)).json(), { status: 'ok', checks: { database: 'ok' } });
  }
});

t.test('a webhook delivered to a loopback receiver is counted by the dispatcher that delivered it', async (t) => {
  const app = await buildApp({ clock: testNow, config: testConfig(env), db });
  t.teardown(() => app.close());
  const hook = await receiver(t);
  const { owner, base } = await ownerWithBrand(app);
  t.equal((await owner.live('POST', `${base}/webhooks`, { url: `${hook.url}/hook`, events: ['ticket.created'] })).status, 201);
  await makeTicket(owner.live, base, { title: 'Watched' });
  await until('the delivery', () => hook.received.length === 1);
  await until('the count', async () => (await delivered()) === 1);
  t.equal(hook.received.length, 1, 'delivered once, by one of the two');

  const scraped = await get(`${open}/metrics`);
  t.equal(scraped.status, 200, 'a loopback client scrapes without a token');
  t.match(scraped.type, /^text\/plain; version=0\.0\.4/);
  t.equal(sample(scraped.text, 'ticketd_dispatcher_listener_up'), 1);
  t.equal(sample(scraped.text, 'ticketd_dispatcher_deliveries_total', { kind: 'mail', outcome: 'delivered' }), 0, 'every series from the start');
  t.type(sample(scraped.text, 'nodejs_eventloop_lag_seconds'), 'number', 'the event-loop lag');
  t.type(sample(scraped.text, 'ticketd_outbox_oldest_due_age_seconds'), 'number', 'the delivery lag');
  t.equal(sample(scraped.text, 'ticketd_http_requests_total'), undefined, 'no API here');
});

t.test('without a token only loopback clients may scrape; no forwarded address is believed', { skip: !outside && 'no address but loopback' }, async (t) => {
  const port = new URL(open).port;
  const refused = await get(`http://${outside}:${port}/metrics`, { 'x-forwarded-for': '127.0.0.1' });
  t.equal(refused.status, 403);
  t.equal(refused.json().code, 'metrics_loopback_only');
  t.equal((await get(`http://${outside}:${port}/health/live`)).status, 200, 'health answers anyone, as the API does');
});

t.test('with a token every client must send it', async (t) => {
  t.equal((await get(`${guarded}/metrics`)).json().code, 'missing_credentials');
  const wrong = await get(`${guarded}/metrics`, { authorization: 'Bearer not-the-metrics-token' });
  t.equal(wrong.status, 401);
  t.equal(wrong.json().code, 'invalid_metrics_token');
  t.equal((await get(`${guarded}/metrics`, { authorization: `Bearer ${TOKEN}` })).status, 200);
});

t.test('start --help names the flag', async (t) => {
  t.match((await runCli(['start', '--help'])).stdout, /--dispatcher-port <port>/);
});

t.test('SIGTERM: both stop gracefully', async (t) => {
  for (const s of servers) s.child.kill('SIGTERM');
  t.same(await Promise.all(servers.map((s) => s.exited)), [0, 0]);
});
