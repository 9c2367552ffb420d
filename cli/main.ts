import { Command, CommanderError } from 'commander';
import { ConfigError } from '../server/core/config.js';
import { HttpError } from '../server/core/errors.js';
import { version } from '../server/core/version.js';
import { registerAccounts } from './commands/accounts.js';
import { registerBrands } from './commands/brands.js';
import { registerContacts } from './commands/contacts.js';
import { registerDb } from './commands/db.js';
import { registerDoctor } from './commands/doctor.js';
import { registerDomains } from './commands/domains.js';
import { registerImport } from './commands/import.js';
import { registerInit } from './commands/init.js';
import { registerKeys } from './commands/keys.js';
import { registerMail } from './commands/mail.js';
import { registerMailboxes } from './commands/mailboxes.js';
import { registerMembers } from './commands/members.js';
import { registerOutbox } from './commands/outbox.js';
import { registerPlans } from './commands/plans.js';
import { registerRecurring } from './commands/recurring.js';
import { registerRules } from './commands/rules.js';
import { registerStores } from './commands/stores.js';
import { registerSecrets } from './commands/secrets.js';
import { registerSso } from './commands/sso.js';
import { registerStart } from './commands/start.js';
import { registerStorage } from './commands/storage.js';
import { registerTickets } from './commands/tickets.js';
import { registerWebhooks } from './commands/webhooks.js';
import type { GlobalOptions } from './globals.js';
import { EXIT, fail, ReportedFailure, UsageError } from './io.js';

export { runState } from './globals.js';

export function buildProgram(): Command {
  const program = new Command('ticketd')
    .description('Self-hosted, multi-tenant, API-first ticketing server')
    .version(version)
    .option('--config <file>', `config file (default: TICKETD_CONFIG, else ./ticketd.config.json if present)`)
    .addHelpText(
      'after',
      `
Exit codes: 0 success, 1 failure, 2 usage error.
Every command takes --json for scripts. Environment: DATABASE_URL, PORT, TICKETD_DATA_DIR, TICKETD_* (see docs/configuration.md).`,
    )
    .exitOverride()
    .showSuggestionAfterError();
  const globals = () => program.opts<GlobalOptions>();
  // Commands import what they run inside their actions (dynamic import), not at the top of their
  // files: every start of the CLI (each script's call, --help) would otherwise load the whole server.
  registerStart(program, globals);
  registerInit(program, globals);
  registerDb(program, globals);
  registerStorage(program, globals);
  registerImport(program, globals);
  registerAccounts(program, globals);
  registerBrands(program, globals);
  registerContacts(program, globals);
  registerTickets(program, globals);
  registerPlans(program, globals);
  registerKeys(program, globals);
  registerMembers(program, globals);
  registerSso(program, globals);
  registerMail(program, globals);
  registerDomains(program, globals);
  registerMailboxes(program, globals);
  registerRecurring(program, globals);
  registerRules(program, globals);
  registerStores(program, globals);
  registerWebhooks(program, globals);
  registerSecrets(program, globals);
  registerOutbox(program, globals);
  registerDoctor(program, globals);
  for (const command of program.commands) command.exitOverride();
  return program;
}

function wantsJson(argv: string[]): boolean {
  return argv.includes('--json');
}

export async function main(argv: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      return err.exitCode === 0 || err.code === 'commander.helpDisplayed' || err.code === 'commander.version' ? EXIT.ok : EXIT.usage;
    }
    if (err instanceof ReportedFailure) return EXIT.failure;
    if (err instanceof UsageError) {
      fail(err.message);
      return EXIT.usage;
    }
    if ((err as Error).name === 'ExitPromptError') return EXIT.failure; // Ctrl-C at a prompt
    const message = err instanceof ConfigError || err instanceof HttpError ? err.message : String((err as Error).message);
    const code = err instanceof HttpError ? err.code : err instanceof ConfigError ? 'invalid_config' : 'failed';
    fail(message, wantsJson(argv) ? { code, problems: err instanceof ConfigError ? err.problems : undefined } : undefined);
    return EXIT.failure;
  }
}
