import type { AuthenticateResult } from 'mailauth';
import { mailAuthResolver, type DnsAnswerCache } from './dns.js';

/**
 * SPF, DKIM, DMARC and ARC of one inbound message (mailauth), summed up as a result word each
 * (pass, fail, softfail, neutral, none, policy, temperror, permerror) and the domain checked.
 * DNS goes through the configured servers with a short timeout and a budget for the whole
 * message: an outage costs bounded time and yields temperror, never an exception.
 */

/** The SMTP client that handed the message over: only the SMTP listener knows it. */
export interface SmtpClient {
  ip: string;
  helo: string;
  /** The envelope sender (MAIL FROM); empty for a bounce (null sender). */
  mailFrom: string;
}

export interface CheckResult {
  result: string;
  domain: string | null;
  comment?: string;
}

export interface MailAuthentication {
  spf: CheckResult;
  dkim: CheckResult & { selector?: string };
  dmarc: CheckResult & { policy?: string };
  arc: CheckResult;
}

export interface MailAuthOptions {
  dnsServers: readonly string[];
  /** This server's name in mailauth's comments. */
  mta: string;
  /** Each DNS lookup, and all of one message's lookups together. */
  lookupTimeoutMs?: number;
  budgetMs?: number;
  /** Answers shared between messages (the process's). */
  cache?: DnsAnswerCache;
}

const LOOKUP_TIMEOUT_MS = 1_500;
const BUDGET_MS = 5_000;

export async function checkMessage(raw: Buffer, client: SmtpClient | null, opts: MailAuthOptions): Promise<MailAuthentication> {
  const resolver = mailAuthResolver(opts.dnsServers, { timeoutMs: opts.lookupTimeoutMs ?? LOOKUP_TIMEOUT_MS, budgetMs: opts.budgetMs ?? BUDGET_MS, cache: opts.cache });
  // Without a client (HTTP, IMAP) mailauth is given no ip, helo nor sender: its SPF then finds no domain to check and looks nothing up.
  const { authenticate } = await import('mailauth'); // loaded on first use: a large module tree
  const checked = await authenticate(raw, {
    ...(client ? { ip: client.ip, helo: client.helo, sender: client.mailFrom || undefined } : {}),
    mta: opts.mta,
    resolver,
    disableBimi: true,
  });
  return summary(checked, client !== null);
}

function summary(checked: AuthenticateResult, hasClient: boolean): MailAuthentication {
  const signatures = checked.dkim.results ?? [];
  const dkim = signatures.find((s) => s.status.result === 'pass') ?? signatures[0];
  const spf = checked.spf;
  const dmarc = checked.dmarc;
  return {
    spf: !hasClient
      ? { result: 'none', domain: null, comment: 'not checked: no SMTP client address (HTTP or mailbox delivery)' }
      : spf
        ? { result: spf.status.result, domain: spf.domain ?? null }
        : { result: 'none', domain: null },
    dkim: dkim ? { result: dkim.status.result, domain: dkim.signingDomain ?? null, ...(dkim.selector ? { selector: dkim.selector } : {}) } : { result: 'none', domain: null },
    dmarc: dmarc
      ? { result: dmarc.status.result, domain: dmarc.domain ?? null, ...(dmarc.policy ? { policy: dmarc.policy.toLowerCase() } : {}) }
      : { result: 'none', domain: null },
    arc: checked.arc ? { result: checked.arc.status.result, domain: (checked.arc.signature && checked.arc.signature.signingDomain) || null } : { result: 'none', domain: null },
  };
}

/**
 * Why a message counts as spam by its sender domain's own DMARC policy: it fails DMARC and the
 * domain asks receivers to reject (p=reject) or quarantine (p=quarantine) such mail. Both make
 * spam here: a helpdesk never bounces, and spam can be restored by an agent.
 */
export function dmarcSpamReason(auth: MailAuthentication): 'dmarc_reject' | 'dmarc_quarantine' | null {
  if (auth.dmarc.result !== 'fail') return null;
  if (auth.dmarc.policy === 'reject') return 'dmarc_reject';
  if (auth.dmarc.policy === 'quarantine') return 'dmarc_quarantine';
  return null;
}

/** Whether one domain is the other or under it: DMARC's relaxed alignment, without the public suffix list. */
const aligned = (a: string, b: string) => a === b || a.endsWith(`.${b}`) || b.endsWith(`.${a}`);

/**
 * Whether the From address is shown to be its sender's: DMARC passed, or a DKIM signature of the
 * From's domain (or a parent or child of it) verified. What a member's mail needs to speak as them.
 */
export function fromIsAuthenticated(auth: MailAuthentication, from: string): boolean {
  const domain = from.split('@')[1]?.toLowerCase() ?? '';
  if (auth.dmarc.result === 'pass') return true;
  return auth.dkim.result === 'pass' && Boolean(auth.dkim.domain) && aligned(auth.dkim.domain!.toLowerCase(), domain);
}
