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
 * The resolver mail authentication (mailauth) looks names up with: dns.promises.resolve's shape,
 * through the configured servers, each lookup short and all of them together bounded by
 * `budgetMs` (past it, every lookup fails at once as a timeout). mailauth reads the error codes:
 * ENOTFOUND/ENODATA mean "not published", anything else a temporary error (temperror).
 */
export function mailAuthResolver(servers: readonly string[], opts: { timeoutMs: number; budgetMs: number }): (name: string, rrtype: string) => Promise<unknown> {
  const resolver = new Resolver({ timeout: opts.timeoutMs, tries: 1 });
  if (servers.length) resolver.setServers([...servers]);
  const deadline = Date.now() + opts.budgetMs;
  return async (name, rrtype) => {
    if (Date.now() > deadline) throw Object.assign(new Error(`DNS time for this message spent before ${rrtype} ${name}`), { code: 'ETIMEOUT' });
    return resolver.resolve(name, rrtype);
  };
}
