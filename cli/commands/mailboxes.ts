import type { Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import { withServices } from '../database.js';
import { brandCtx } from '../context.js';
import { emit, need, needSecret, ReportedFailure, table, UsageError } from '../io.js';
import type { GlobalOptions } from '../globals.js';

/** Inbound mail's modules (parsing, authentication), loaded by the commands that read a mailbox only. */
const loadMailboxSync = () => import('../../server/flows/mailbox-sync.js');
const loadEmailConnections = () => import('../../server/domains/email-connections/service.js');

export function registerMailboxes(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('mailboxes').description("a brand's mailboxes, taken in over IMAP (email connections)");
  const config = () => loadConfig({ configFile: globals().config });

  cmd
    .command('list <brandId>')
    .description("the brand's mailboxes, the primary first, with their state")
    .option('--json', 'JSON output')
    .action(async (brandId: string, opts: { json?: boolean }) => {
      const emailConnections = await loadEmailConnections();
      const rows = await withServices(config(), async (services) => emailConnections.list(await brandCtx(services, brandId), brandId), { migrate: true });
      emit(Boolean(opts.json), rows, () =>
        table(rows as unknown as Record<string, unknown>[], ['id', 'email', 'host', 'port', 'status', 'isPrimary', 'lastSyncAt', 'errorMessage']),
      );
    });

  cmd
    .command('add <brandId>')
    .description('connect a mailbox: over IMAP with a password (an app password for Google, Microsoft and Fastmail), or a Google or Microsoft one with a refresh token')
    .option('--provider <provider>', 'imap (a password), gmail or outlook (XOAUTH2 with a refresh token, through the OAuth client configured)', 'imap')
    .option('--email <address>', "the mailbox's address")
    .option('--host <host>', 'IMAP server (gmail: imap.gmail.com, outlook: outlook.office365.com by default)')
    .option('--port <n>', 'default 993 (143 with --no-tls)')
    .option('--no-tls', 'STARTTLS on port 143 instead of TLS from the first byte')
    .option('--username <name>', 'default: the address')
    .option('--password <password>', 'imap: the password (else TICKETD_MAILBOX_PASSWORD, else asked without echo)')
    .option('--refresh-token <token>', 'gmail, outlook: the refresh token (else TICKETD_MAILBOX_REFRESH_TOKEN, else asked without echo)')
    .option('--name <name>', 'default: the address')
    .option('--mailbox <folder>', 'the folder taken in (default INBOX)')
    .option('--move-to <folder>', 'move taken-in messages there instead of flagging them \\Seen')
    .option('--json', 'JSON output')
    .action(
      async (
        brandId: string,
        opts: {
          provider: string;
          email?: string;
          host?: string;
          port?: string;
          tls: boolean;
          username?: string;
          password?: string;
          refreshToken?: string;
          name?: string;
          mailbox?: string;
          moveTo?: string;
          json?: boolean;
        },
      ) => {
        const provider = opts.provider.toUpperCase();
        if (provider !== 'IMAP' && provider !== 'GMAIL' && provider !== 'OUTLOOK') throw new UsageError('--provider must be imap, gmail or outlook');
        const email = await need(opts.email, '--email', 'Mailbox address');
        const host = provider === 'IMAP' ? await need(opts.host, '--host', 'IMAP server') : opts.host;
        const secret =
          provider === 'IMAP'
            ? { password: await needSecret(opts.password, '--password', 'TICKETD_MAILBOX_PASSWORD', 'Password (an app password)') }
            : { refreshToken: await needSecret(opts.refreshToken, '--refresh-token', 'TICKETD_MAILBOX_REFRESH_TOKEN', 'Refresh token') };
        const port = opts.port === undefined ? undefined : Number(opts.port);
        if (port !== undefined && !(Number.isInteger(port) && port >= 1 && port <= 65535)) throw new UsageError('--port must be a port number (1-65535)');
        const loaded = config();
        const emailConnections = await loadEmailConnections();
        const created = await withServices(
          loaded,
          async (services) =>
            emailConnections.create(await brandCtx(services, brandId), { allowPrivate: loaded.webhookAllowPrivate }, brandId, {
              provider,
              email,
              host,
              port,
              tls: opts.tls,
              username: opts.username,
              ...secret,
              name: opts.name,
              mailbox: opts.mailbox,
              moveTo: opts.moveTo,
            }),
          { migrate: true },
        );
        emit(Boolean(opts.json), created, () => [
          `mailbox ${created.id} ${created.email} at ${created.host}:${created.port}${created.isPrimary ? ' (primary)' : ''}: ${created.status}`,
        ]);
      },
    );

  cmd
    .command('test <brandId> <connectionId>')
    .description('log in and open the folder, changing nothing: whether the mailbox can be read, and how many messages wait; exit 1 if it cannot')
    .option('--json', 'JSON output')
    .action(async (brandId: string, connectionId: string, opts: { json?: boolean }) => {
      const mailboxSync = await loadMailboxSync();
      const result = await withServices(config(), async (services) => mailboxSync.testConnection(await brandCtx(services, brandId), brandId, connectionId), { migrate: true });
      emit(Boolean(opts.json), result, () => [result.success ? `the mailbox can be read: ${result.waiting} message(s) waiting` : `the mailbox cannot be read: ${result.error}`]);
      if (!result.success) throw new ReportedFailure();
    });

  cmd
    .command('sync <brandId>')
    .description("take the brand's mailboxes in now (every ACTIVE or ERROR one, or --connection), as the dispatcher does every mailboxPollSeconds")
    .option('--connection <id>', 'only this mailbox (also one whose server refused its password)')
    .option('--full', 'read the folder from its first message again (what was taken in already is known by Message-ID)')
    .option('--json', 'JSON output')
    .action(async (brandId: string, opts: { connection?: string; full?: boolean; json?: boolean }) => {
      const [mailboxSync, { attachmentDepsOf }] = await Promise.all([loadMailboxSync(), import('../../server/domains/attachments/service.js')]);
      const result = await withServices(
        config(),
        async (services) => {
          const ctx = await brandCtx(services, brandId);
          const deps = { inbound: { attachments: attachmentDepsOf(services) } };
          if (!opts.connection) return { success: true, ...(await mailboxSync.syncBrand(ctx, deps, brandId, Boolean(opts.full))) };
          return opts.full ? { success: true, ...(await mailboxSync.syncOne(ctx, deps, brandId, opts.connection, true)) } : mailboxSync.retry(ctx, deps, brandId, opts.connection);
        },
        { migrate: true },
      );
      emit(Boolean(opts.json), result, () => [result.success ? `${result.ticketsCreated} ticket(s) created` : `the mailbox cannot be read: ${result.error ?? 'unknown'}`]);
      if (!result.success) throw new ReportedFailure();
    });
}
