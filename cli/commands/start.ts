import { Option, type Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import type { Role, Running } from '../../server/main.js';
import { emit, note } from '../io.js';
import { runState, type GlobalOptions } from '../globals.js';

function curlLine(running: Running): string | null {
  const brand = running.bootstrap?.brand;
  const key = running.bootstrap?.apiKeys.live.key;
  return brand && key ? `curl -s ${running.baseUrl}/v1/brands -H "Authorization: Bearer ${key}"` : null;
}

function banner(running: Running): string[] {
  // A dispatcher alone serves no API: no URL to name.
  const at = running.role === 'dispatcher' ? '' : ` at ${running.baseUrl}`;
  const lines = [`ticketd is running${at} (role ${running.role}, ${running.database} PostgreSQL)`];
  const b = running.bootstrap;
  if (b) {
    lines.push(
      '',
      `First start: created account ${b.account.id} (owner ${b.owner.email}) and brand "${b.brand!.name}" (${b.brand!.id}).`,
      'API keys, shown this once; store them now:',
      `  live: ${b.apiKeys.live.key}`,
      `  test: ${b.apiKeys.test.key}   (test mode sees only test data)`,
      '',
      'Try it:',
      `  ${curlLine(running)}`,
    );
  }
  if (running.smtpPort !== null) lines.push(`Inbound mail by SMTP on port ${running.smtpPort}`);
  if (running.dispatcherUrl) lines.push(`Dispatcher health and metrics: ${running.dispatcherUrl}/health/ready and ${running.dispatcherUrl}/metrics`);
  if (running.role !== 'dispatcher') lines.push('', `API docs: ${running.baseUrl}/docs   OpenAPI: ${running.baseUrl}/v1/openapi.json`);
  lines.push('Press Ctrl-C to stop.');
  return lines;
}

export function registerStart(program: Command, globals: () => GlobalOptions): void {
  program
    .command('start')
    .description('run the server: migrate, bootstrap an empty database, then serve the API and/or run the dispatcher (see --role)')
    .addOption(new Option('--role <role>', 'what this process runs').choices(['all', 'api', 'dispatcher']).default('all'))
    .option('--port <port>', 'HTTP port (default: PORT or 3000)')
    .option('--smtp-port <port>', 'also listen for inbound mail by SMTP on this port, for direct MX delivery (default: TICKETD_SMTP_PORT, else off)')
    .option('--dispatcher-port <port>', "with --role dispatcher: the port of its health and metrics, or off (default: TICKETD_DISPATCHER_PORT or 3001; --role all uses the API's)")
    .option('--json', 'print the start-up summary (and any bootstrap keys) as one JSON line')
    .action(async (opts: { role: Role; port?: string; smtpPort?: string; dispatcherPort?: string; json?: boolean }) => {
      const env = {
        ...process.env,
        ...(opts.port ? { PORT: opts.port } : {}),
        ...(opts.smtpPort ? { TICKETD_SMTP_PORT: opts.smtpPort } : {}),
        ...(opts.dispatcherPort ? { TICKETD_DISPATCHER_PORT: opts.dispatcherPort } : {}),
      };
      const config = loadConfig({ configFile: globals().config, env });
      // Loaded here: the server's modules are most of a start-up, and other commands need none of them.
      const { startServer, stopOnSignals } = await import('../../server/main.js');
      const starting = startServer(config, opts.role, note);
      stopOnSignals(starting, config, note);
      const running = await starting;
      emit(
        Boolean(opts.json),
        {
          url: running.baseUrl,
          role: running.role,
          database: running.database,
          smtpPort: running.smtpPort,
          dispatcherUrl: running.dispatcherUrl,
          docsUrl: `${running.baseUrl}/docs`,
          bootstrap: running.bootstrap,
          curl: curlLine(running),
        },
        () => banner(running),
      );
      runState.serving = true;
    });
}
