import type { Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import { isEmail, normalizeEmail } from '../../server/core/text.js';
import { emit, note, UsageError } from '../io.js';
import type { GlobalOptions } from '../globals.js';

export function registerMail(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('mail').description('outbound mail');

  cmd
    .command('send-test <to>')
    .description('send a test message through the configured transport (file: an .eml under <dataDir>/mail/outbox; smtp: the relay) and print where it went')
    .option('--json', 'JSON output')
    .action(async (to: string, opts: { json?: boolean }) => {
      const address = normalizeEmail(to);
      if (!isEmail(address)) throw new UsageError(`${to} is not an email address`);
      const config = loadConfig({ configFile: globals().config });
      const [{ mailSettings, testMessage }, { mailTransport, sendMail }] = await Promise.all([
        import('../../server/domains/mail/messages.js'),
        import('../../server/integrations/mail.js'),
      ]);
      const transport = mailTransport(config, note);
      try {
        const sent = await sendMail(transport, testMessage(mailSettings(config), address));
        emit(Boolean(opts.json), sent, () => [
          sent.transport === 'file' ? `written ${sent.messageId} to ${sent.path}` : `sent ${sent.messageId} via ${config.mailSmtpHost}: ${sent.response}`,
        ]);
      } finally {
        transport.close();
      }
    });
}
