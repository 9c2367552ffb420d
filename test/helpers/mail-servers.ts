import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ImapFlow } from 'imapflow';
import type { Test } from 'tap';
import { systemBinary } from './system-binary.js';
import { freePort } from '../../server/integrations/embedded-postgres.js';
import { imapServer, PASSWORD } from './imap.js';
import { until } from './wait.js';

/**
 * An IMAP server a test connects a brand's mailbox to, whichever it is: hoodiecrow-imap (in this
 * process, always there) or Dovecot (a process of its own, when `dovecot` is installed). The
 * user is `desk` with PASSWORD; ticketd reads `folder`.
 */
export interface TestMailServer {
  port: number;
  folder: string;
  append(raw: string): Promise<void>;
  /** Whether each message of the folder is flagged \Seen, in UID order. */
  seen(): Promise<boolean[]>;
  /** The folder made anew, as a server rebuilding it does: another UIDVALIDITY, the same messages under new UIDs. */
  rebuild(): Promise<void>;
  setPassword(password: string): Promise<void>;
}

export type MailServerFactory = (t: Test, messages: string[], options?: { idle?: boolean }) => Promise<TestMailServer>;

export const hoodiecrowServer: MailServerFactory = async (t, messages, options = {}) => {
  const { server, port, inbox } = await imapServer(t, messages, { idle: options.idle });
  return {
    port,
    folder: 'INBOX',
    append: async (raw) => server.appendMessage('INBOX', [], undefined, raw),
    seen: async () => inbox().map((m) => m.flags.includes('\\Seen')),
    rebuild: async () => {
      const folder = server.getMailbox('INBOX');
      folder.uidvalidity += 1;
      folder.messages.forEach((m, i) => (m.uid = i + 1));
      folder.uidnext = folder.messages.length + 1;
    },
    setPassword: async (password) => void (server.users.desk = { password }),
  };
};

export const dovecotBinary = () => systemBinary('dovecot');

/**
 * A Dovecot of the test's own: its configuration, users and maildirs in a temporary directory,
 * listening on a free loopback port, run in the foreground and stopped at the test's end. As
 * root it drops to Dovecot's own users; otherwise it runs as the current user.
 */
export const dovecotServer: MailServerFactory = async (t, messages) => {
  const binary = dovecotBinary();
  if (!binary) throw new Error('dovecot is not installed');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-dovecot-'));
  // Dovecot's auth process reads the users' file as its own user (dovecot, when started as root).
  chmodSync(dir, 0o755);
  const passwd = path.join(dir, 'passwd');
  const writePassword = (password: string) => writeFileSync(passwd, `desk:{PLAIN}${password}::::::\n`);
  writePassword(PASSWORD);

  for (const sub of ['run', 'state', 'home']) mkdirSync(path.join(dir, sub));
  const port = await freePort();
  const user = os.userInfo();
  const asRoot = user.uid === 0;
  // Mail is never handled as root: as root, the maildir belongs to Dovecot's own user.
  const mailUser = asRoot
    ? { uid: Number(execFileSync('id', ['-u', 'dovecot']).toString()), gid: Number(execFileSync('id', ['-g', 'dovecot']).toString()) }
    : { uid: user.uid, gid: user.gid };
  chownSync(path.join(dir, 'home'), mailUser.uid, mailUser.gid);
  writeFileSync(
    path.join(dir, 'dovecot.conf'),
    [
      `base_dir = ${dir}/run`,
      `state_dir = ${dir}/state`,
      `log_path = ${dir}/log`,
      'listen = 127.0.0.1',
      'protocols = imap',
      'ssl = no',
      'disable_plaintext_auth = no',
      'auth_mechanisms = plain login',
      // A wrong password is answered at once (not after 2 s), and IDLE sessions hear of new mail within a second.
      'auth_failure_delay = 0',
      'mailbox_idle_check_interval = 1 secs',
      'first_valid_uid = 1',
      'first_valid_gid = 1',
      ...(asRoot
        ? []
        : [`default_login_user = ${user.username}`, `default_internal_user = ${user.username}`, `default_internal_group = ${execFileSync('id', ['-gn']).toString().trim()}`]),
      `passdb {\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%u ${passwd}\n}`,
      `userdb {\n  driver = static\n  args = uid=${mailUser.uid} gid=${mailUser.gid} home=${dir}/home/%u\n}`,
      'mail_location = maildir:~/Maildir',
      // Not chrooted unless root (only root may chroot).
      `service imap-login {\n  ${asRoot ? '' : 'chroot =\n  '}inet_listener imap {\n    address = 127.0.0.1\n    port = ${port}\n  }\n  inet_listener imaps {\n    port = 0\n  }\n}`,
      // No growing pause after failed logins (the wrong-password case makes some on purpose): Dovecot's documented switch for its auth penalty.
      `service anvil {\n  ${asRoot ? '' : 'chroot =\n  '}unix_listener anvil-auth-penalty {\n    mode = 0\n  }\n}`,
    ].join('\n'),
  );
  const child = spawn(binary, ['-F', '-c', path.join(dir, 'dovecot.conf')], { stdio: 'ignore' });
  t.teardown(async () => {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  });
  await until(
    'dovecot listens',
    () =>
      new Promise<boolean>((resolve) =>
        net
          .connect(port, '127.0.0.1')
          .on('connect', function (this: net.Socket) {
            this.destroy();
            resolve(true);
          })
          .on('error', () => resolve(false)),
      ),
  );

  const folder = 'Desk';
  /** What a mail client of the user does, through a session of its own. */
  let current = PASSWORD;
  const asUser = async <T>(work: (client: ImapFlow) => Promise<T>, password = current): Promise<T> => {
    const client = new ImapFlow({ host: '127.0.0.1', port, secure: false, auth: { user: 'desk', pass: password }, logger: false });
    client.on('error', () => undefined); // reported by the call that meets it
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.logout();
    }
  };
  const appendAll = async (client: ImapFlow, raws: string[]) => {
    for (const raw of raws) await client.append(folder, raw);
  };
  await asUser(async (client) => {
    await client.mailboxCreate(folder);
    await appendAll(client, messages);
  });
  return {
    port,
    folder,
    append: (raw) => asUser((client) => appendAll(client, [raw])),
    seen: () =>
      asUser(async (client) => {
        await client.mailboxOpen(folder);
        const all = await client.fetchAll('1:*', { uid: true, flags: true }, { uid: true }).catch(() => []);
        return all.sort((a, b) => a.uid - b.uid).map((m) => m.flags?.has('\\Seen') ?? false);
      }),
    rebuild: () =>
      asUser(async (client) => {
        await client.mailboxOpen(folder);
        const all = await client.fetchAll('1:*', { uid: true, source: true }, { uid: true });
        await client.mailboxClose();
        await client.mailboxDelete(folder);
        await client.mailboxCreate(folder);
        await appendAll(
          client,
          all.sort((a, b) => a.uid - b.uid).map((m) => m.source!.toString('latin1')),
        );
      }),
    // Dovecot looks at the users' file again at most once a second: the change is in force once a login with it passes.
    setPassword: async (password) => {
      writePassword(password);
      await until('dovecot takes the new password', () => asUser(async () => true, password).catch(() => false));
      current = password;
    },
  };
};

/** The servers this machine can run: hoodiecrow always, Dovecot when it is installed. */
export function mailServers(): [string, MailServerFactory][] {
  return [['hoodiecrow-imap', hoodiecrowServer], ...(dovecotBinary() ? [['Dovecot', dovecotServer] as [string, MailServerFactory]] : [])];
}
