import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import nodemailer, { type SendMailOptions } from 'nodemailer';
import type { Config } from '../core/config.js';
import type { DomainSigning, MailAddress, MailMessage, MailTransport, SentMail } from '../core/ports.js';

/**
 * Outbound mail through nodemailer. A message is a plain, serialisable object (the outbox stores it
 * as jsonb; its handler calls sendMail), so a retried send is byte-for-byte the same message with
 * the same Message-ID, which receivers and threading recognise.
 *
 * Transports (config `mailTransport`):
 * - `file` (the default): each message is written as `<dataDir>/mail/outbox/<Message-ID>.eml` and
 *   one line is logged, so a fresh install never touches the network. The file is named by the
 *   Message-ID, so a retried send rewrites the same file.
 * - `smtp`: a relay (`mailSmtpHost`, `mailSmtpPort`; `mailSmtpSecure` for TLS from the first byte,
 *   otherwise STARTTLS when offered, required with `mailSmtpRequireTls`; `mailSmtpUser`/`Pass`).
 */

/**
 * nodemailer's options for a message; with `signing`, DKIM-signed and with its own envelope sender
 * (an envelope given names every recipient too: nodemailer then takes none from the headers).
 */
function options(message: MailMessage, signing?: DomainSigning): SendMailOptions {
  const address = (a: MailAddress) => (a.name ? { name: a.name, address: a.address } : a.address);
  const envelope = signing && { from: signing.envelopeFrom, to: [...message.to, ...message.cc].map((a) => a.address) };
  return {
    from: address(message.from),
    to: message.to.map(address),
    cc: message.cc.map(address),
    ...(message.replyTo ? { replyTo: message.replyTo } : {}),
    subject: message.subject,
    text: message.text,
    html: message.html,
    messageId: message.messageId,
    ...(message.inReplyTo ? { inReplyTo: message.inReplyTo } : {}),
    ...(message.references.length ? { references: message.references } : {}),
    headers: message.headers,
    ...(signing ? { envelope, dkim: signing.dkim } : {}),
  };
}

/** A file name for a Message-ID: `<a.b@c>` -> `a.b@c.eml`, anything unusual replaced. */
function fileNameOf(messageId: string): string {
  return `${messageId
    .replace(/^<|>$/g, '')
    .replace(/[^A-Za-z0-9._@+-]/g, '_')
    .slice(0, 200)}.eml`;
}

export function fileTransport(dir: string, log: (line: string) => void = () => undefined): MailTransport {
  const renderer = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'windows' });
  return {
    kind: 'file',
    async send(message, signing) {
      const info = (await renderer.sendMail(options(message, signing))) as { message: Buffer };
      await mkdir(dir, { recursive: true });
      const file = path.join(dir, fileNameOf(message.messageId));
      // Written aside and renamed: a reader never sees half a message.
      const partial = `${file}.${process.pid}.partial`;
      await writeFile(partial, info.message);
      await rename(partial, file);
      log(`mail ${message.messageId} (${message.kind}) to ${message.to.map((a) => a.address).join(', ')} written to ${file}`);
      return { messageId: message.messageId, transport: 'file', path: file };
    },
    close: () => renderer.close(),
  };
}

export function smtpTransport(config: Pick<Config, 'mailSmtpHost' | 'mailSmtpPort' | 'mailSmtpSecure' | 'mailSmtpRequireTls' | 'mailSmtpUser' | 'mailSmtpPass'>): MailTransport {
  const transport = nodemailer.createTransport({
    host: config.mailSmtpHost!,
    port: config.mailSmtpPort,
    secure: config.mailSmtpSecure,
    requireTLS: config.mailSmtpRequireTls,
    ...(config.mailSmtpUser ? { auth: { user: config.mailSmtpUser, pass: config.mailSmtpPass ?? '' } } : {}),
    connectionTimeout: 30_000,
    greetingTimeout: 30_000,
    socketTimeout: 60_000,
  });
  return {
    kind: 'smtp',
    async send(message, signing) {
      const info = await transport.sendMail(options(message, signing));
      return { messageId: message.messageId, transport: 'smtp', response: info.response };
    },
    close: () => transport.close(),
  };
}

/** The transport the configuration names. */
export function mailTransport(config: Config, log?: (line: string) => void): MailTransport {
  return config.mailTransport === 'smtp' ? smtpTransport(config) : fileTransport(path.join(config.dataDir, 'mail', 'outbox'), log);
}

/** What the outbox's mail handler calls: one delivery attempt of a stored message (signed, when from a brand's own domain). */
export function sendMail(transport: MailTransport, message: MailMessage, signing?: DomainSigning): Promise<SentMail> {
  return transport.send(message, signing);
}
