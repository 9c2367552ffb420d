import { systemCtx, tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../core/context.js';
import { conflict, HttpError } from '../core/errors.js';
import { locate, type Brand } from '../core/brand.js';
import type { EmailConnection } from '../domains/email-connections/model.js';
import * as emailConnections from '../domains/email-connections/service.js';
import { ImapAuthRefused, ImapFailed, ImapMailbox, type FetchedMessage, type ImapServer, type ListedMessage } from '../integrations/imap.js';
import { OAuthFailed, oauthClientOf, OAuthRefused, refreshAccess, type OAuthProvider } from '../integrations/oauth-token.js';
import { prepare, receiveTogether, type InboundDeps, type InboundResult, type PreparedInbound } from './inbound-mail.js';

/**
 * A brand's mailboxes taken in over IMAP: each new message goes through inbound mail (receive)
 * as the brand's, and becomes a ticket or a comment exactly once.
 *
 * Messages are read in UID order after the connection's last_uid; each one's last_uid is saved in
 * the transaction of what it created, on the condition that it is still below it. A sync that
 * dies between fetching and committing leaves the message to the next sync; two syncs of one
 * connection take turns on its row, and the second finds the message taken. Taken-in messages are
 * then flagged \Seen or moved (after the commit: a sync that dies there leaves them unflagged).
 * No network I/O happens inside a transaction.
 */

export interface MailboxSyncDeps {
  inbound: InboundDeps;
}

export interface SyncOutcome {
  success: boolean;
  ticketsCreated: number;
  error?: string;
}

/**
 * Takes over a mailbox's session once a sync has read everything, to wait there for new mail
 * (IMAP IDLE: the dispatcher's MailboxWatch). true: the session is its own to close.
 */
export interface MailboxWatcher {
  watch(row: EmailConnection, mailbox: ImapMailbox): boolean;
}

/** Whether the dispatcher is stopping. */
type Until = () => boolean;

/**
 * A sync's time: it starts no new message once the dispatcher is stopping, or once its time is
 * up and it has taken in one message at least (a slow login or listing never stops all progress).
 */
class Budget {
  private progressed = false;
  constructor(
    private readonly now: () => number,
    private readonly deadline: number,
    private readonly stopping: Until,
  ) {}
  taken(): void {
    this.progressed = true;
  }
  spent(): boolean {
    return this.stopping() || (this.progressed && this.now() > this.deadline);
  }
}

/** Messages fetched from the server at once. */
const FETCH_BATCH = 50;
/**
 * Messages being prepared (parsed, authenticated, their raw copy staged) while one is taken in.
 * Preparing waits on DNS and the disk more than it computes: a few at once keep the transactions
 * from waiting on it.
 */
const PREPARED_AHEAD = 8;
/** Messages taken in by one transaction at most (takeInGroup). */
const GROUP = 10;
/** A request's sync stops starting new messages after this long; the dispatcher takes up the rest. */
const REQUEST_BUDGET_MS = 20_000;
/** The dispatcher's syncs per round, run at once, and how long each may start new messages. */
const DUE_PER_ROUND = 4;
const ROUND_BUDGET_MS = 10_000;

/** The message was taken in by another sync of the connection meanwhile. */
class TakenElsewhere extends Error {}

type Taken = 'ticket' | 'other' | 'passed_over';

/** A message read and authenticated ahead of its turn (inbound mail's prepare), or why it could not be. */
type Preparing = Promise<{ prepared: PreparedInbound } | { error: unknown }>;

function prepareAhead(ctx: TenantCtx, deps: MailboxSyncDeps, row: EmailConnection, brand: Brand | null, uidValidity: string, message: FetchedMessage): Preparing {
  const taken = async (tx: TenantCtx) => {
    if (!(await emailConnections.advance(tx, row, uidValidity, message.uid))) throw new TakenElsewhere();
  };
  const base = { ...systemCtx(ctx.services, 'mailbox'), log: ctx.log };
  return prepare(base, deps.inbound, message.raw, { mailbox: { brandId: row.brandId, brand, taken } }).then(
    (prepared) => ({ prepared }),
    (error: unknown) => ({ error }),
  );
}

/** Messages prepared and not taken in (the sync stopped): their staged copies thrown away. */
async function discardAhead(preparing: Iterable<Preparing>): Promise<void> {
  for (const ahead of preparing) {
    const outcome = await ahead;
    if ('prepared' in outcome) await outcome.prepared.discard();
  }
}

/** One message through inbound mail, the connection's place saved with its outcome. */
async function takeIn(ctx: TenantCtx, row: EmailConnection, uidValidity: string, uid: number, preparing: Preparing): Promise<Taken> {
  try {
    const outcome = await preparing;
    if ('error' in outcome) throw outcome.error;
    const result = await outcome.prepared.receive();
    return result.action === 'ticket_created' && !result.duplicate ? 'ticket' : 'other';
  } catch (err) {
    if (err instanceof TakenElsewhere) return 'other';
    if (!(err instanceof HttpError) || err.statusCode >= 500) throw err;
    // Not a message ticketd can take (no From, not MIME): passed over, left unread for a person.
    ctx.log?.warn({ connectionId: row.id, uid, code: err.code }, 'a message of a mailbox was passed over');
    await emailConnections.advance(ctx, row, uidValidity, uid);
    return 'passed_over';
  }
}

/** The messages of a batch inbound mail takes (the larger ones are passed over unread). */
function fetchBatch(ctx: TenantCtx, mailbox: ImapMailbox, batch: readonly ListedMessage[]): Promise<FetchedMessage[]> {
  return mailbox.fetch(batch.filter((m) => m.size <= ctx.services.config.inboundMaxBytes).map((m) => m.uid));
}

/** A message prepared, waiting for its group's transaction. */
interface Ready {
  message: FetchedMessage;
  prepared: PreparedInbound;
}

/**
 * Consecutive messages taken in in one transaction, the mailbox's place saved once with them: the
 * statements a transaction costs besides its messages' (BEGIN, COMMIT, the place) are shared.
 * When it cannot be committed (a message over the plan's allowance, one taken in elsewhere, any
 * failure) it is rolled back, and each message is prepared again and taken in on its own, as if
 * no group had been tried. A group holds the brand row from its first ticket to its commit.
 */
async function takeInGroup(ctx: TenantCtx, deps: MailboxSyncDeps, row: EmailConnection, brand: Brand | null, uidValidity: string, group: readonly Ready[]): Promise<Taken[]> {
  if (group.length === 1) return [await takeIn(ctx, row, uidValidity, group[0]!.message.uid, Promise.resolve({ prepared: group[0]!.prepared }))];
  let results: InboundResult[];
  try {
    results = await withTx(ctx, async (tx) => {
      const taken = await receiveTogether(
        tx,
        group.map((m) => m.prepared),
      );
      if (!(await emailConnections.advance(tx, row, uidValidity, group.at(-1)!.message.uid))) throw new TakenElsewhere();
      return taken;
    });
  } catch {
    for (const m of group) await m.prepared.end(false);
    const taken: Taken[] = [];
    for (const m of group) taken.push(await takeIn(ctx, row, uidValidity, m.message.uid, prepareAhead(ctx, deps, row, brand, uidValidity, m.message)));
    return taken;
  }
  for (const m of group) await m.prepared.end(true);
  return results.map((r) => (r.action === 'ticket_created' && !r.duplicate ? 'ticket' : 'other'));
}

/**
 * One batch, fetched (while the batch before it was taken in) and taken in UID order, the ones
 * passed over included (the saved place never passes a message not taken in), then flagged or
 * moved. Stops when the budget is spent. Messages are prepared (parsed, authenticated: no
 * transaction) a few ahead of the one taken in, so their DNS lookups and parsing overlap its
 * transaction.
 */
async function takeInBatch(
  ctx: TenantCtx,
  deps: MailboxSyncDeps,
  row: EmailConnection,
  mailbox: ImapMailbox,
  batch: readonly ListedMessage[],
  fetched: readonly FetchedMessage[],
  budget: Budget,
): Promise<{ ticketsCreated: number; complete: boolean }> {
  const maxBytes = ctx.services.config.inboundMaxBytes;
  // Read once for the batch: its settings (autoresponse, inbound mail on) as of the batch's start.
  const brand = await locate(ctx, row.brandId);
  const ahead = new Map<number, Preparing>();
  let prepared = 0;
  const prepareNext = () => {
    const next = fetched[prepared++];
    if (next) ahead.set(next.uid, prepareAhead(ctx, deps, row, brand, mailbox.uidValidity, next));
  };
  for (let i = 0; i < PREPARED_AHEAD; i++) prepareNext();
  const done: number[] = [];
  let ticketsCreated = 0;
  let complete = true;
  let group: Ready[] = [];
  const count = (uid: number, taken: Taken) => {
    if (taken === 'ticket') ticketsCreated++;
    if (taken !== 'passed_over') done.push(uid);
  };
  const takeGroup = async () => {
    const taking = group;
    group = [];
    if (!taking.length) return;
    const taken = await takeInGroup(ctx, deps, row, brand, mailbox.uidValidity, taking);
    taking.forEach((m, i) => count(m.message.uid, taken[i]!));
    budget.taken();
  };
  try {
    for (const { uid, size } of batch) {
      if (budget.spent()) {
        complete = false;
        break;
      }
      const preparing = ahead.get(uid);
      if (!preparing) {
        await takeGroup();
        // Larger than inbound mail takes (left unread for a person), or gone from the folder since it was listed.
        if (size > maxBytes) ctx.log?.warn({ connectionId: row.id, uid, size }, 'a message of a mailbox is over inboundMaxBytes: passed over');
        await emailConnections.advance(ctx, row, mailbox.uidValidity, uid);
        continue;
      }
      ahead.delete(uid);
      prepareNext();
      const outcome = await preparing;
      if ('prepared' in outcome) {
        group.push({ message: fetched.find((m) => m.uid === uid)!, prepared: outcome.prepared });
        if (group.length >= GROUP) await takeGroup();
        continue;
      }
      await takeGroup();
      count(uid, await takeIn(ctx, row, mailbox.uidValidity, uid, preparing));
      budget.taken();
    }
    await takeGroup();
  } finally {
    await discardAhead([...ahead.values(), ...group.map((m) => Promise.resolve({ prepared: m.prepared }))]);
  }
  await mailbox.markTaken(done, row.moveTo);
  return { ticketsCreated, complete };
}

/**
 * Where and how a connection signs in: its password, opened for this connection only; or, for
 * GMAIL and OUTLOOK, an access token its refresh token is exchanged for (a new refresh token the
 * provider issues is kept). Failures come out as the IMAP ones: a refused token as refused
 * credentials (DISCONNECTED), an unreachable token endpoint as a network failure (ERROR).
 */
async function serverOf(ctx: TenantCtx, row: EmailConnection): Promise<ImapServer> {
  const config = ctx.services.config;
  const secret = await emailConnections.secretOf(ctx, row);
  return {
    host: row.host,
    port: row.port,
    tls: row.tls,
    username: row.username,
    credential: row.provider === 'IMAP' ? { password: secret } : { accessToken: await accessTokenOf(ctx, row, row.provider, secret) },
    allowPrivate: config.webhookAllowPrivate,
    timeoutMs: config.mailboxTimeoutMs,
  };
}

async function accessTokenOf(ctx: TenantCtx, row: EmailConnection, provider: OAuthProvider, refreshToken: string): Promise<string> {
  const client = oauthClientOf(ctx.services.config, provider);
  if (!client) throw new ImapFailed(`This server has no OAuth client for ${provider} any more: configure it again, or connect the mailbox as IMAP`);
  try {
    const access = await refreshAccess(client, refreshToken, ctx.services.config.mailboxTimeoutMs);
    if (access.refreshToken && access.refreshToken !== refreshToken) await emailConnections.replaceRefreshToken(ctx, row, access.refreshToken);
    return access.accessToken;
  } catch (err) {
    if (err instanceof OAuthRefused) throw new ImapAuthRefused(err.message);
    if (err instanceof OAuthFailed) throw new ImapFailed(err.message);
    throw err;
  }
}

/** Syncs one connection (marked SYNCING by the caller) and records how it went. Network failures are an outcome, not an error. */
async function syncConnection(
  ctx: TenantCtx,
  deps: MailboxSyncDeps,
  row: EmailConnection,
  options: { full: boolean; budgetMs: number; stopping?: Until; watcher?: MailboxWatcher },
): Promise<SyncOutcome & { complete: boolean }> {
  const deadline = ctx.services.now() + options.budgetMs;
  const budget = new Budget(ctx.services.now, deadline, options.stopping ?? (() => false));
  let ticketsCreated = 0;
  let mailbox: ImapMailbox | null = null;
  try {
    mailbox = await ImapMailbox.open(await serverOf(ctx, row), row.mailbox);
    const after = await emailConnections.startingPoint(ctx, row, mailbox.uidValidity, options.full);
    const listed = await mailbox.listAfter(after);
    let complete = true;
    let fetching = listed.length ? fetchBatch(ctx, mailbox, listed.slice(0, FETCH_BATCH)) : null;
    for (let i = 0; i < listed.length && complete; i += FETCH_BATCH) {
      const fetched = await fetching!;
      // The next batch comes over the network while this one is taken in; a sync that stops first leaves it unread.
      const following = listed.slice(i + FETCH_BATCH, i + 2 * FETCH_BATCH);
      fetching = following.length ? fetchBatch(ctx, mailbox, following) : null;
      fetching?.catch(() => undefined); // its failure is met when its turn comes
      const batch = await takeInBatch(ctx, deps, row, mailbox, listed.slice(i, i + FETCH_BATCH), fetched, budget);
      ticketsCreated += batch.ticketsCreated;
      complete = batch.complete;
    }
    await emailConnections.recordSynced(ctx, row, complete);
    if (complete && options.watcher?.watch(row, mailbox)) mailbox = null;
    return { success: true, ticketsCreated, complete };
  } catch (err) {
    // The virus scanner down (scanFailure refuse): the message waits unread, and the connection says why, retried as a server's failure is.
    const scannerDown = err instanceof HttpError && err.code === 'scanner_unavailable';
    if (!(err instanceof ImapAuthRefused) && !(err instanceof ImapFailed) && !scannerDown) throw err;
    await emailConnections.recordFailure(ctx, row, { refused: err instanceof ImapAuthRefused, message: err.message });
    return { success: false, ticketsCreated, error: err.message, complete: true };
  } finally {
    await mailbox?.close();
  }
}

async function syncNow(ctx: TenantCtx, deps: MailboxSyncDeps, row: EmailConnection, full: boolean): Promise<SyncOutcome> {
  await emailConnections.markSyncing(ctx, row);
  const { complete: _, ...outcome } = await syncConnection(ctx, deps, row, { full, budgetMs: REQUEST_BUDGET_MS });
  return outcome;
}

/** Every ACTIVE or ERROR connection of the brand, one after the other; `full`: from UID 1 (duplicates are known by Message-ID). */
export async function syncBrand(ctx: TenantCtx, deps: MailboxSyncDeps, brandId: string, full = false): Promise<{ ticketsCreated: number }> {
  let ticketsCreated = 0;
  for (const row of await emailConnections.ofBrandToSync(ctx, brandId, ['ACTIVE', 'ERROR'])) {
    ticketsCreated += (await syncNow(ctx, deps, row, full)).ticketsCreated;
  }
  return { ticketsCreated };
}

/** One connection now, unless its server refused the credentials (retry is for that). */
export async function syncOne(ctx: TenantCtx, deps: MailboxSyncDeps, brandId: string, connectionId: string, full = false): Promise<{ ticketsCreated: number }> {
  const row = await emailConnections.findToSync(ctx, brandId, connectionId);
  if (row.status === 'DISCONNECTED') {
    throw conflict(`The server refused this mailbox's credentials (${row.errorMessage ?? 'no reason given'}): retry it to try them again`, 'email_connection_disconnected');
  }
  return { ticketsCreated: (await syncNow(ctx, deps, row, full)).ticketsCreated };
}

/** One connection now, whatever its state: the answer says whether it could be read. */
export async function retry(ctx: TenantCtx, deps: MailboxSyncDeps, brandId: string, connectionId: string): Promise<SyncOutcome> {
  return syncNow(ctx, deps, await emailConnections.findToSync(ctx, brandId, connectionId), false);
}

/**
 * Logs in and opens the folder, changing nothing (`ticketd mailboxes test`): whether it can be
 * read, and how many messages wait after the place saved.
 */
export async function testConnection(ctx: TenantCtx, brandId: string, connectionId: string): Promise<{ success: boolean; waiting?: number; error?: string }> {
  const row = await emailConnections.findToSync(ctx, brandId, connectionId);
  let mailbox: ImapMailbox | null = null;
  try {
    mailbox = await ImapMailbox.open(await serverOf(ctx, row), row.mailbox);
    const sameFolder = row.uidValidity === mailbox.uidValidity;
    return { success: true, waiting: (await mailbox.listAfter(sameFolder ? Number(row.lastUid) : 0)).length };
  } catch (err) {
    if (!(err instanceof ImapAuthRefused) && !(err instanceof ImapFailed)) throw err;
    return { success: false, error: err.message };
  } finally {
    await mailbox?.close();
  }
}

/**
 * One round of the dispatcher's: a few connections due (see claimDue), synced at once, each
 * starting new messages for a bounded time. `unfinished`: how many stopped with mail still waiting
 * (they are due again at once, and the dispatcher runs another round). One connection's failure is
 * its own: it is recorded, or logged, and the others go on.
 */
export async function syncDue(
  base: BaseCtx,
  deps: MailboxSyncDeps,
  options: { stopping?: Until; roundMs?: number; watcher?: MailboxWatcher } = {},
): Promise<{ synced: number; failed: number; ticketsCreated: number; unfinished: number }> {
  const due = await emailConnections.claimDue(base, base.services.config.mailboxPollSeconds, DUE_PER_ROUND);
  const budgetMs = options.roundMs ?? ROUND_BUDGET_MS;
  const outcomes = await Promise.allSettled(due.map((row) => syncConnection(tenantCtx(base, row.accountId, row.livemode), deps, row, { full: false, budgetMs, ...options })));
  const stats = { synced: 0, failed: 0, ticketsCreated: 0, unfinished: 0 };
  outcomes.forEach((outcome, i) => {
    if (outcome.status === 'fulfilled') {
      stats[outcome.value.success ? 'synced' : 'failed']++;
      stats.ticketsCreated += outcome.value.ticketsCreated;
      if (!outcome.value.complete) stats.unfinished++;
    } else {
      stats.failed++;
      base.services.log.error({ err: outcome.reason, connectionId: due[i]!.id }, 'a mailbox sync failed: it is taken up again later');
    }
  });
  return stats;
}

/**
 * A watched mailbox reported new mail: it is synced now, unless another sync has it (SYNCING) or
 * it is no longer ACTIVE. Returns whether it synced, and whether mail is still waiting.
 */
export async function syncWoken(
  base: BaseCtx,
  deps: MailboxSyncDeps,
  row: EmailConnection,
  options: { stopping?: Until; roundMs?: number; watcher?: MailboxWatcher } = {},
): Promise<{ synced: boolean; ticketsCreated: number; unfinished: boolean }> {
  const ctx = tenantCtx(base, row.accountId, row.livemode);
  const claimed = await emailConnections.claimActive(ctx, row);
  if (!claimed) return { synced: false, ticketsCreated: 0, unfinished: false };
  const outcome = await syncConnection(ctx, deps, claimed, { full: false, budgetMs: options.roundMs ?? ROUND_BUDGET_MS, ...options });
  return { synced: outcome.success, ticketsCreated: outcome.ticketsCreated, unfinished: !outcome.complete };
}
