import { Option, type Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import type { TenantCtx } from '../../server/core/context.js';
import { withServices } from '../database.js';
import { accountCtx, type Mode } from '../context.js';
import { confirmOrFlag, emit, UsageError, writeDocument } from '../io.js';
import type { GlobalOptions } from '../globals.js';

const modeOption = () => new Option('--mode <mode>', 'live or test data').choices(['live', 'test']).default('live');

interface PersonOptions {
  account?: string;
  mode: Mode;
  email?: string;
  brand?: string;
  contact?: string;
}

/** Either --email (every brand of the account) or --brand with --contact (one contact), never both. */
function personOf(opts: PersonOptions): { email: string } | { brandId: string; contactId: string } {
  if (opts.email !== undefined && (opts.brand !== undefined || opts.contact !== undefined)) throw new UsageError('pass --email, or --brand with --contact, not both');
  if (opts.email !== undefined) return { email: opts.email };
  if (opts.brand === undefined || opts.contact === undefined) throw new UsageError('missing --email, or --brand with --contact');
  return { brandId: opts.brand, contactId: opts.contact };
}

const personOptions = (cmd: Command) =>
  cmd
    .option('--account <id>', 'account id (default: the only account)')
    .addOption(modeOption())
    .option('--email <email>', 'the person: their contacts in every brand of the account')
    .option('--brand <id>', 'the brand of --contact')
    .option('--contact <id>', 'the person: one contact of --brand');

/** A data subject's requests: export and erase (decision 0120). */
export function registerContacts(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('contacts').description("a customer's data: export it, erase it");
  const config = () => loadConfig({ configFile: globals().config });

  personOptions(cmd.command('export').description('everything held about a person, as one JSON document (to stdout or --out)'))
    .option('--out <file>', 'write the document to this file')
    .action(async (opts: PersonOptions & { out?: string }) => {
      const person = personOf(opts);
      const { contactTarget, emailTargets, exportDocument } = await import('../../server/flows/contact-export.js');
      const attachments = await import('../../server/domains/attachments/service.js');
      await withServices(
        config(),
        async (services) => {
          const ctx = await accountCtx(services, opts.account, opts.mode);
          const targets = 'email' in person ? await emailTargets(ctx, person.email) : await contactTarget(ctx, person.brandId, person.contactId);
          // Download links point at the configured publicUrl (else this host's listening address).
          const io = attachments.forRequest(attachments.attachmentDepsOf(services), 'http', `localhost:${services.config.port}`);
          await writeDocument(exportDocument(ctx, io, targets), opts.out);
        },
        { migrate: true },
      );
    });

  personOptions(cmd.command('erase').description('erase a person: name and email become a tombstone, their messages are redacted, their files deleted; tickets stay'))
    .option('--yes', 'do not ask for confirmation')
    .option('--json', 'JSON output')
    .action(async (opts: PersonOptions & { yes?: boolean; json?: boolean }) => {
      const person = personOf(opts);
      const who = 'email' in person ? `every contact of ${person.email}` : `contact ${person.contactId}`;
      if (!(await confirmOrFlag(opts.yes, `Erase ${who}? This cannot be undone.`))) return;
      const { eraseByEmail, eraseContact } = await import('../../server/flows/contact-erasure.js');
      const erased = await withServices(
        config(),
        async (services) => {
          const ctx: TenantCtx = await accountCtx(services, opts.account, opts.mode);
          return 'email' in person ? eraseByEmail(ctx, person.email) : { contacts: [await eraseContact(ctx, person.brandId, person.contactId)] };
        },
        { migrate: true },
      );
      emit(Boolean(opts.json), erased, () =>
        erased.contacts.length
          ? erased.contacts.map(
              (e) =>
                `${e.contactId} (brand ${e.brandId}) erased as ${e.tombstone}: ${e.counts.tickets} tickets kept, ${e.counts.comments} comments redacted, ${e.counts.attachments} attachments deleted`,
            )
          : ['no contact has that email: nothing to erase'],
      );
    });
}
