import net from 'node:net';
import type { ImapFlow, ImapFlowError } from 'imapflow';
import { isNonPublicAddress, publicLookup } from '../core/outbound.js';

/**
 * One IMAP session with a brand's mailbox (imapflow): log in, open the folder, list and fetch
 * messages by UID, flag or move the ones taken in. Every failure comes out as one of two errors:
 * the server refused the credentials (ImapAuthRefused), or anything else went wrong on the way
 * (ImapFailed: refused or timed-out connection, TLS, a folder that is not there).
 */

export interface ImapServer {
  host: string;
  port: number;
  /** TLS from the first byte; false: STARTTLS when the server offers it. */
  tls: boolean;
  username: string;
  /** A password (LOGIN), or an OAuth access token (AUTHENTICATE XOAUTH2). */
  credential: { password: string } | { accessToken: string };
  /** webhookAllowPrivate: loopback and private addresses may be connected to. */
  allowPrivate: boolean;
  /** Bound on connecting, the greeting, and each wait for the server once connected. */
  timeoutMs: number;
}

/** The server said no to the user name and password: its own words are the message. */
export class ImapAuthRefused extends Error {
  override name = 'ImapAuthRefused';
}

/** The mailbox could not be reached or read (network, TLS, timeout, a folder refused). */
export class ImapFailed extends Error {
  override name = 'ImapFailed';
}

export interface ListedMessage {
  uid: number;
  size: number;
}

export interface FetchedMessage {
  uid: number;
  raw: Buffer;
}

function failure(err: unknown): Error {
  if (err instanceof ImapAuthRefused || err instanceof ImapFailed) return err;
  const e = err as ImapFlowError;
  if (e?.authenticationFailed) return new ImapAuthRefused(serverWords(e) || 'The server refused the user name and password');
  return new ImapFailed(serverWords(e) || String(err));
}

/** The server's own text when it answered NO or BAD, else the error's message. */
function serverWords(e: ImapFlowError | undefined): string {
  const text = typeof e?.response === 'string' ? e.response : (e?.responseText ?? '');
  return (text || e?.message || '').trim();
}

/** UIDs as an IMAP sequence set, consecutive ones as ranges (1:5,9). */
function uidSet(uids: readonly number[]): string {
  const parts: string[] = [];
  const sorted = [...uids].sort((a, b) => a - b);
  for (let i = 0; i < sorted.length; i++) {
    const start = sorted[i]!;
    while (sorted[i + 1] === sorted[i]! + 1) i++;
    parts.push(start === sorted[i] ? String(start) : `${start}:${sorted[i]}`);
  }
  return parts.join(',');
}

export class ImapMailbox {
  private constructor(
    private readonly client: ImapFlow,
    /** The folder's UIDVALIDITY: UIDs of another value name other messages. */
    readonly uidValidity: string,
  ) {}

  /** Logs in and opens the folder. Throws ImapAuthRefused or ImapFailed. */
  static async open(server: ImapServer, folder: string): Promise<ImapMailbox> {
    const host = server.host.replace(/^\[(.*)\]$/, '$1');
    // A name is checked on the address it resolves to, when connecting (publicLookup); a literal here.
    if (!server.allowPrivate && net.isIP(host) && isNonPublicAddress(host)) throw new ImapFailed(`${host} is not a public address`);
    const { ImapFlow } = await import('imapflow'); // loaded on first use: only a dispatcher syncing mailboxes needs it
    const client = new ImapFlow({
      host,
      port: server.port,
      secure: server.tls,
      auth:
        'accessToken' in server.credential ? { user: server.username, accessToken: server.credential.accessToken } : { user: server.username, pass: server.credential.password },
      logger: false,
      disableAutoIdle: true,
      connectionTimeout: server.timeoutMs,
      greetingTimeout: server.timeoutMs,
      socketTimeout: server.timeoutMs * 4,
      // Passed to net.connect and tls.connect alike.
      tls: server.allowPrivate ? {} : { lookup: publicLookup },
    });
    // Errors after connect() settles come as events too; the awaited call reports them.
    client.on('error', () => undefined);
    try {
      await client.connect();
      const mailbox = await client.mailboxOpen(folder);
      return new ImapMailbox(client, mailbox.uidValidity.toString());
    } catch (err) {
      client.close();
      throw failure(err);
    }
  }

  /** The messages with a UID above `afterUid`, in UID order, with their sizes. */
  async listAfter(afterUid: number): Promise<ListedMessage[]> {
    // What SELECT said: nothing there, or nothing after afterUid (some servers refuse `1:*` in an empty folder).
    const selected = this.client.mailbox;
    if (!selected || !selected.exists || (selected.uidNext && selected.uidNext <= afterUid + 1)) return [];
    try {
      // `n:*` also names the last message when every UID is below n: filtered out.
      const found = await this.client.fetchAll(`${afterUid + 1}:*`, { uid: true, size: true }, { uid: true });
      return found
        .filter((m) => m.uid > afterUid)
        .map((m) => ({ uid: m.uid, size: m.size ?? 0 }))
        .sort((a, b) => a.uid - b.uid);
    } catch (err) {
      throw failure(err);
    }
  }

  /** The raw messages of these UIDs (without setting \Seen), in UID order. */
  async fetch(uids: readonly number[]): Promise<FetchedMessage[]> {
    if (!uids.length) return [];
    try {
      const found = await this.client.fetchAll(uidSet(uids), { uid: true, source: true }, { uid: true });
      return found
        .filter((m) => m.source)
        .map((m) => ({ uid: m.uid, raw: m.source! }))
        .sort((a, b) => a.uid - b.uid);
    } catch (err) {
      throw failure(err);
    }
  }

  /** Flags the messages \Seen, or moves them to `moveTo`. Nothing is deleted. */
  async markTaken(uids: readonly number[], moveTo: string | null): Promise<void> {
    if (!uids.length) return;
    try {
      if (moveTo) {
        // Without either, a move is a copy and a plain EXPUNGE, which also removes messages someone else flagged \Deleted.
        if (!this.client.capabilities.has('MOVE') && !this.client.capabilities.has('UIDPLUS')) {
          throw new ImapFailed('The server cannot move messages (no MOVE or UIDPLUS): connect the mailbox without moveTo');
        }
        if (!(await this.client.messageMove(uidSet(uids), moveTo, { uid: true }))) throw new ImapFailed(`The messages could not be moved to ${moveTo}`);
      } else await this.client.messageFlagsAdd(uidSet(uids), ['\\Seen'], { uid: true });
    } catch (err) {
      throw failure(err);
    }
  }

  /** The server offers IDLE (RFC 2177): it tells this session of new mail as it arrives. */
  get canIdle(): boolean {
    return this.client.capabilities.has('IDLE');
  }

  /**
   * Waits in IDLE until the server reports new mail in the folder (true), or `maxMs` passes, the
   * signal aborts or the session ends (false). IDLE is entered again whenever it is broken off
   * (imapflow breaks it to check a quiet connection with NOOP). The session stays open: close it.
   */
  waitForNewMail(signal: AbortSignal, maxMs: number): Promise<boolean> {
    const client = this.client;
    return new Promise((resolve) => {
      let settled = false;
      const finish = (arrived: boolean) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        client.off('exists', onExists);
        client.off('close', onClose);
        signal.removeEventListener('abort', onClose);
        resolve(arrived);
      };
      const onExists = (info: { count: number; prevCount: number }) => {
        if (info.count > info.prevCount) finish(true);
      };
      const onClose = () => finish(false);
      const timer = setTimeout(onClose, maxMs);
      client.on('exists', onExists);
      client.on('close', onClose);
      signal.addEventListener('abort', onClose);
      if (signal.aborted) return onClose();
      void (async () => {
        // idle() answers false when the server refused IDLE: then there is nothing to wait on.
        while (!settled && client.usable) if ((await client.idle().catch(() => false)) === false) break;
        finish(false);
      })();
    });
  }

  /** Logs out; a session that cannot is closed. */
  async close(): Promise<void> {
    await this.client.logout().catch(() => this.client.close());
  }
}
