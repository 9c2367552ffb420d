import { Resolver } from 'node:dns/promises';
import { part } from '../core/services.js';

/**
 * DNS lookups for domain verification, through the servers the configuration names (dnsServers:
 * `address` or `address:port`) or the system's. A name without the record answers an empty list;
 * a lookup that could not be made (timeout, refused, server failure) throws DnsUnavailable, so a
 * caller can tell "not published" from "not known now".
 */
export interface DnsLookup {
  /** Each TXT record with its strings joined. */
  txt(name: string): Promise<string[]>;
  mx(name: string): Promise<{ exchange: string; priority: number }[]>;
  cname(name: string): Promise<string[]>;
}

export class DnsUnavailable extends Error {}

/** Answers of these mean the name or the record does not exist. */
const ABSENT: readonly string[] = ['ENOTFOUND', 'ENODATA', 'NXDOMAIN', 'ENONAME'];

export function dnsLookup(servers: readonly string[]): DnsLookup {
  const resolver = new Resolver({ timeout: 2_000, tries: 2 });
  if (servers.length) resolver.setServers([...servers]);
  const ask = async <T>(name: string, lookup: () => Promise<T[]>): Promise<T[]> => {
    try {
      return await lookup();
    } catch (err) {
      const code = (err as { code?: string }).code ?? '';
      if (ABSENT.includes(code)) return [];
      throw new DnsUnavailable(`the DNS lookup of ${name} failed (${code || (err as Error).message})`);
    }
  };
  return {
    txt: async (name) => (await ask(name, () => resolver.resolveTxt(name))).map((chunks) => chunks.join('')),
    mx: (name) => ask(name, () => resolver.resolveMx(name)),
    cname: (name) => ask(name, () => resolver.resolveCname(name)),
  };
}

export const dnsPart = part('dns', (services) => dnsLookup(services.config.dnsServers));

/**
 * Answers kept for a while, as a caching resolver keeps them: mail comes in bursts from the same
 * domains, and Node's resolver asks the server every time (a resolver without a cache took 100 ms
 * a lookup here, and a message of example.net three lookups). Lookups of one name at once share
 * one query. An answer saying the record does not exist is kept too; a failure that may pass
 * (timeout, server failure, refused) is not. Node's TXT answers carry no TTL: every answer is
 * kept `ttlMs`, short enough to follow a changed record soon after.
 */
export class DnsAnswerCache {
  private readonly answers = new Map<string, { until: number; answer: Promise<unknown> }>();

  constructor(
    private readonly ttlMs = 60_000,
    private readonly maxEntries = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  lookup(key: string, ask: () => Promise<unknown>): Promise<unknown> {
    const now = this.now();
    const kept = this.answers.get(key);
    if (kept && kept.until > now) return kept.answer;
    const answer = ask();
    this.answers.delete(key);
    // Oldest first out: a Map keeps insertion order.
    if (this.answers.size >= this.maxEntries) this.answers.delete(this.answers.keys().next().value!);
    this.answers.set(key, { until: now + this.ttlMs, answer });
    answer.catch((err: unknown) => {
      if (!ABSENT.includes((err as { code?: string }).code ?? '') && this.answers.get(key)?.answer === answer) this.answers.delete(key);
    });
    return answer;
  }
}

/** One cache per process, for every message's lookups. */
export const mailDnsCachePart = part('mail-dns-cache', () => new DnsAnswerCache());

/**
 * The resolver mail authentication (mailauth) looks names up with: dns.promises.resolve's shape,
 * through the configured servers and `cache`, each lookup short and all of one message's together
 * bounded by `budgetMs` (past it, every lookup fails at once as a timeout). mailauth reads the
 * error codes: ENOTFOUND/ENODATA mean "not published", anything else a temporary error (temperror).
 */
export function mailAuthResolver(
  servers: readonly string[],
  opts: { timeoutMs: number; budgetMs: number; cache?: DnsAnswerCache },
): (name: string, rrtype: string) => Promise<unknown> {
  const resolver = new Resolver({ timeout: opts.timeoutMs, tries: 1 });
  if (servers.length) resolver.setServers([...servers]);
  const deadline = Date.now() + opts.budgetMs;
  return async (name, rrtype) => {
    if (Date.now() > deadline) throw Object.assign(new Error(`DNS time for this message spent before ${rrtype} ${name}`), { code: 'ETIMEOUT' });
    const ask = () => resolver.resolve(name, rrtype);
    return opts.cache ? opts.cache.lookup(`${rrtype} ${name.toLowerCase()}`, ask) : ask();
  };
}
