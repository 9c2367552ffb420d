import type { Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import { withServices } from '../database.js';
import { adminCtx } from '../context.js';
import { emit } from '../io.js';
import type { GlobalOptions } from '../globals.js';

export function registerSecrets(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('secrets').description('the secrets ticketd keeps for its own use (mailbox passwords, DKIM keys, webhook secrets), stored sealed');

  cmd
    .command('rotate-key')
    .description(
      'seal every stored secret with a new key: a new key in the database, or the first of encryptionKeys when the configuration names some (put the new one first, keep the old listed until this has run); the server may keep running',
    )
    .option('--json', 'JSON output')
    .action(async (opts: { json?: boolean }) => {
      const { rotateKey } = await import('../../server/flows/secrets.js');
      const rotation = await withServices(loadConfig({ configFile: globals().config }), (services) => rotateKey(adminCtx(services)), { migrate: true });
      emit(Boolean(opts.json), rotation, () => [
        `Secrets are sealed with key ${rotation.keyId}${rotation.newKey ? ' (new, kept in the database)' : ' (the first of encryptionKeys)'}.`,
        ...Object.entries(rotation.rewrapped).map(([column, n]) => `  ${column}: ${n} re-wrapped`),
      ]);
    });
}
