import type { EmailConnection } from '../domains/email-connections/model.js';
import type { MailboxWatcher } from '../flows/mailbox-sync.js';
import type { ImapMailbox } from '../integrations/imap.js';

/**
 * The dispatcher's IMAP IDLE sessions: after a sync has read a mailbox to the end, its session is
 * kept open in IDLE when the server offers it, and new mail is taken in as it arrives rather than
 * at the next poll. Polling goes on as the safety net (a session lost, a server that never says);
 * the poll's own session then takes the place of the one watched before.
 *
 * One session per connection in this process, at most `max` at once (the rest are polled only).
 * A session watches for `maxMs` at most, then closes; the next poll opens another.
 */
export class MailboxWatch implements MailboxWatcher {
  private readonly sessions = new Map<string, AbortController>();
  /** Every session still closing, the ones replaced included. */
  private readonly ending = new Set<Promise<void>>();
  private closed = false;

  constructor(
    private readonly options: {
      max: number;
      maxMs: number;
      /** New mail arrived in this connection's folder. */
      onNewMail: (row: EmailConnection) => void;
      /** The number of sessions open, each time it changes. */
      onSize?: (size: number) => void;
    },
  ) {}

  watch(row: EmailConnection, mailbox: ImapMailbox): boolean {
    if (this.closed || !mailbox.canIdle) return false;
    const before = this.sessions.get(row.id);
    if (!before && this.sessions.size >= this.options.max) return false;
    before?.abort();
    const stop = new AbortController();
    this.sessions.set(row.id, stop);
    this.options.onSize?.(this.sessions.size);
    const ended = (async () => {
      const arrived = await mailbox.waitForNewMail(stop.signal, this.options.maxMs);
      if (this.sessions.get(row.id) === stop) this.sessions.delete(row.id);
      this.options.onSize?.(this.sessions.size);
      await mailbox.close();
      if (arrived && !this.closed) this.options.onNewMail(row);
    })().finally(() => this.ending.delete(ended));
    this.ending.add(ended);
    return true;
  }

  /** Ends every session (logged out) and watches no more. */
  async close(): Promise<void> {
    this.closed = true;
    for (const stop of this.sessions.values()) stop.abort();
    await Promise.all([...this.ending]);
  }
}
