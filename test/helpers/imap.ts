import { createRequire } from 'node:module';
import type net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';

/** A mailbox of a real IMAP server (hoodiecrow-imap, in memory) that tests read and change. */
export interface StoredMessage {
  uid: number;
  flags: string[];
  raw: string;
}
interface Folder {
  uidvalidity: number;
  uidnext: number;
  messages: StoredMessage[];
}
export interface ImapTestServer {
  users: Record<string, { password: string }>;
  server: net.Server;
  listen(port: number, host: string, done: () => void): void;
  close(done: () => void): void;
  getMailbox(path: string): Folder;
  appendMessage(mailbox: string, flags: string[], internaldate: undefined, raw: string): void;
}
const hoodiecrow = createRequire(import.meta.url)('hoodiecrow-imap') as (options: object) => ImapTestServer;

/** The password of the test server's user `desk`. */
export const PASSWORD = 'app-password';

/** What connects a brand to the test server at `port` as `desk` (POST …/email-connections). */
export function imapConnection(port: number, fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { provider: 'IMAP', email: 'desk@acme.example', host: '127.0.0.1', port, tls: false, username: 'desk', password: PASSWORD, ...fields };
}

/**
 * An IMAP server on a free loopback port with user desk, INBOX holding `messages`, and a folder
 * Taken. `accessToken`: the user also signs in with AUTHENTICATE XOAUTH2 and this token. `idle`:
 * the server offers IDLE. `sessions()`: the IMAP connections open now.
 */
export async function imapServer(
  t: Test,
  messages: string[] = [],
  options: { accessToken?: string; idle?: boolean } = {},
): Promise<{ server: ImapTestServer; port: number; inbox: () => StoredMessage[]; sessions: () => Promise<number> }> {
  const server = hoodiecrow({
    plugins: ['MOVE', 'UIDPLUS', ...(options.accessToken ? ['SASL-IR', 'XOAUTH2'] : []), ...(options.idle ? ['IDLE'] : [])],
    users: { desk: { password: PASSWORD, ...(options.accessToken ? { xoauth2: { accessToken: options.accessToken } } : {}) } },
    storage: { INBOX: { messages: messages.map((raw) => ({ raw })) }, '': { separator: '/', folders: { Taken: {} } } },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const sessions = () => new Promise<number>((resolve, reject) => server.server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
  return { server, port: (server.server.address() as AddressInfo).port, inbox: () => server.getMailbox('INBOX').messages, sessions };
}

/** A customer's question `n` to desk@acme.example, its Message-ID unique to `run`; `headers` added. */
export function customerMessage(run: string, n: number, headers: string[] = []): string {
  return [
    `From: Customer ${n} <customer${n}@example.net>`,
    'To: desk@acme.example',
    `Subject: Question ${n}`,
    `Message-ID: <q${n}-${run}@example.net>`,
    'Date: Thu, 26 Nov 2026 10:00:00 +0000',
    ...headers,
    '',
    `Hello, this is question ${n}.`,
  ].join('\r\n');
}
