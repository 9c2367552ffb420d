import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Requests ticketd makes on behalf of tenants (webhooks) must not reach the server's own network:
 * loopback, private, link-local, unspecified, multicast and reserved addresses are refused, for
 * IPv4 and IPv6 (IPv4-mapped and NAT64 addresses are judged by the IPv4 address they carry). The
 * check runs when a URL is registered and again on every connection (publicLookup), so a host
 * name that later resolves elsewhere (DNS rebinding) is caught on the address actually used.
 * Operators running receivers on their own network set webhookAllowPrivate.
 */

/** The IPv4 address an IPv6 address carries (IPv4-mapped, IPv4-compatible, NAT64), if any. */
function carriedIpv4(v6: ipaddr.IPv6): ipaddr.IPv4 | null {
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address();
  const p = v6.parts;
  const compatible = p.slice(0, 6).every((x) => x === 0) && (p[6] !== 0 || p[7]! > 1);
  if (!compatible && v6.range() !== 'rfc6052') return null;
  return new ipaddr.IPv4([p[6]! >> 8, p[6]! & 255, p[7]! >> 8, p[7]! & 255]);
}

/**
 * True for addresses a tenant's request must not reach (see the file comment): anything
 * ipaddr.js does not class as plain unicast (loopback, private, carrier-grade NAT, link-local,
 * unique local, multicast, documentation, reserved, 6to4 and Teredo tunnels...).
 */
export function isNonPublicAddress(address: string): boolean {
  if (!net.isIP(address)) return true; // not an address at all: refuse rather than guess
  const parsed = ipaddr.parse(address);
  const judged = parsed.kind() === 'ipv6' ? (carriedIpv4(parsed as ipaddr.IPv6) ?? parsed) : parsed;
  return judged.range() !== 'unicast';
}

/** Why an outbound URL is refused. */
export class OutboundRefused extends Error {
  constructor(
    message: string,
    readonly code: 'private_address' | 'unresolvable',
  ) {
    super(message);
    this.name = 'OutboundRefused';
  }
}

/** The host of a URL without IPv6 brackets. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/**
 * Resolves the URL's host and refuses it when any address is not public (unless allowed). An IP
 * literal is judged as it is; a name that does not resolve is refused as unresolvable.
 */
export async function assertPublicHost(url: URL, allowPrivate: boolean): Promise<void> {
  const host = hostOf(url);
  let addresses: string[];
  if (net.isIP(host)) addresses = [host];
  else {
    try {
      addresses = (await dns.promises.lookup(host, { all: true, verbatim: true })).map((a) => a.address);
    } catch {
      throw new OutboundRefused(`${host} does not resolve to an address`, 'unresolvable');
    }
  }
  if (allowPrivate) return;
  const bad = addresses.find(isNonPublicAddress);
  if (bad) throw new OutboundRefused(`${host} is or resolves to a non-public address (${bad})`, 'private_address');
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/**
 * A `lookup` for net/tls.connect that refuses non-public addresses: the connection goes to the
 * very address that was checked. (IP literals skip lookup; callers check those with assertPublicHost.)
 */
export function publicLookup(hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  dns.lookup(hostname, { ...options, all: true, verbatim: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const list = addresses as dns.LookupAddress[];
    const bad = list.find((a) => isNonPublicAddress(a.address));
    if (bad) return callback(new OutboundRefused(`${hostname} resolves to a non-public address (${bad.address})`, 'private_address'), []);
    if (options.all) return callback(null, list);
    callback(null, list[0]!.address, list[0]!.family);
  });
}
