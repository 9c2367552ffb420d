import net, { type AddressInfo } from 'node:net';
import t from 'tap';
import { ImapFailed, ImapMailbox, type ImapServer } from '../../server/integrations/imap.js';

/** The IMAP integration's own rule for where it connects: webhookAllowPrivate, checked on the address actually used. */

const listening = net.createServer((socket) => socket.end('* OK ready\r\n'));
await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
t.teardown(() => listening.close());
const server = (host: string, allowPrivate: boolean): ImapServer => ({
  host,
  port: (listening.address() as AddressInfo).port,
  tls: false,
  username: 'desk',
  credential: { password: 'pw' },
  allowPrivate,
  timeoutMs: 2000,
});

t.test('a loopback or private host is refused before any byte is sent, unless private addresses are allowed', async (t) => {
  let connections = 0;
  const count = () => connections++;
  listening.on('connection', count);
  t.teardown(() => listening.off('connection', count));
  for (const host of ['127.0.0.1', '[::1]', 'localhost']) {
    await t.rejects(ImapMailbox.open(server(host, false), 'INBOX'), ImapFailed, `${host} is refused`);
  }
  t.equal(connections, 0, 'nothing was connected to');
  // Allowed, it connects (and fails later: this server says nothing more than its greeting).
  await t.rejects(ImapMailbox.open(server('127.0.0.1', true), 'INBOX'), ImapFailed);
  t.equal(connections, 1);
});
