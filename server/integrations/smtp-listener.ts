import { SMTPServer } from 'smtp-server';
import type { SmtpClient } from './mail-auth.js';

/**
 * An SMTP listener for direct MX delivery of inbound mail (`ticketd start --smtp-port N`). It is
 * an MX, not a relay: no AUTH, RCPT accepted only at the domains ticketd receives for (the inbound
 * domain, the brands' verified INBOUND domains), messages size-limited
 * (announced with SIZE, 552 beyond). STARTTLS is not offered: ticketd has no certificate to offer;
 * put a TLS-terminating MTA in front, or use POST /v1/inbound/email, where transport security matters.
 * Each message goes to `deliver` with its envelope recipients and its client (address, HELO name,
 * MAIL FROM: what SPF checks); a client error there (4xx, e.g. an
 * unknown brand or a message that is not MIME) is a permanent 550, anything else a temporary 451
 * so the sending server retries.
 */

export interface SmtpListenerOptions {
  host: string;
  port: number;
  maxBytes: number;
  /** Whether mail to this domain (lower case) is ticketd's to receive. */
  acceptsDomain(domain: string): Promise<boolean>;
  deliver(raw: Buffer, recipients: string[], client: SmtpClient): Promise<unknown>;
  log(line: string): void;
}

export interface SmtpListener {
  port: number;
  close(): Promise<void>;
}

function smtpError(message: string, responseCode: number): Error {
  return Object.assign(new Error(message), { responseCode });
}

export async function startSmtpListener(opts: SmtpListenerOptions): Promise<SmtpListener> {
  const server = new SMTPServer({
    banner: 'ticketd',
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    size: opts.maxBytes,
    logger: false,
    onRcptTo(address, _session, callback) {
      const at = address.address.lastIndexOf('@');
      const domain = at < 0 ? '' : address.address.slice(at + 1).toLowerCase();
      const denied = () => callback(smtpError(`Relay denied: mail for ${domain || 'that address'} is not received here`, 550));
      if (!domain) return denied();
      opts.acceptsDomain(domain).then(
        (accepted) => (accepted ? callback() : denied()),
        () => callback(smtpError('Temporary failure; try again later', 451)),
      );
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', (err: Error) => callback(err));
      stream.on('end', () => {
        if (stream.sizeExceeded) return callback(smtpError(`Message exceeds the size limit of ${opts.maxBytes} bytes`, 552));
        const recipients = session.envelope.rcptTo.map((a) => a.address);
        const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
        const client = { ip: session.remoteAddress, helo: session.hostNameAppearsAs, mailFrom };
        opts.deliver(Buffer.concat(chunks), recipients, client).then(
          () => callback(),
          (err: Error & { statusCode?: number }) => {
            const permanent = err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500;
            if (!permanent) opts.log(`inbound SMTP delivery failed: ${err.message}`);
            callback(smtpError(permanent ? err.message : 'Temporary failure; try again later', permanent ? 550 : 451));
          },
        );
      });
    },
  });
  server.on('error', (err) => opts.log(`SMTP listener error: ${err.message}`));
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.server.off('error', reject);
      resolve();
    });
  });
  const port = (server.server.address() as { port: number }).port;
  return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
