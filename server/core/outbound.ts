import dns from 'node:dns';
import net from 'node:net';

/**
 * Requests ticketd makes on behalf of tenants (webhooks) must not reach the server's own network:
 * loopback, private, link-local, unspecified, multicast and reserved addresses are refused, for
 * IPv4 and IPv6 (IPv4-mapped and NAT64 addresses are judged by the IPv4 address they carry). The
 * check runs when a URL is registered and again on every connection (publicLookup), so a host
 * name that later resolves elsewhere (DNS rebinding) is caught on the address actually used.
 * Operators running receivers on their own network set webhookAllowPrivate.
 */

const BLOCKED = new net.BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local (cloud metadata)
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const)
  BLOCKED.addSubnet(network, prefix, 'ipv4');
for (const [network, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
  ['2001:db8::', 32], // documentation
  ['100::', 64], // discard
] as const)
  BLOCKED.addSubnet(network, prefix, 'ipv6');

/** The eight 16-bit groups of an IPv6 address (any valid spelling). */
function ipv6Groups(address: string): number[] {
  let text = address.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted[1]!.split('.').map(Number) as [number, number, number, number];
    text = text.slice(0, -dotted[1]!.length) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? (text.split('::') as [string, string]) : [text, null];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const zeros = tail === null ? [] : Array(8 - left.length - right.length).fill('0');
  return [...left, ...zeros, ...right].map((g) => parseInt(g, 16));
}

/** The IPv4 address an IPv6 address carries (IPv4-mapped, IPv4-compatible, NAT64), if any. */
function embeddedIpv4(address: string): string | null {
  const g = ipv6Groups(address);
  const v4 = () => `${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`;
  if (g.slice(0, 5).every((x) => x === 0) && (g[5] === 0xffff || g[5] === 0) && (g[6] || g[7]! > 1)) return v4();
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return v4();
  return null;
}

/** True for addresses a tenant's request must not reach (see the file comment). */
export function isNonPublicAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return BLOCKED.check(address, 'ipv4');
  if (family === 6) {
    const v4 = embeddedIpv4(address);
    return v4 ? BLOCKED.check(v4, 'ipv4') : BLOCKED.check(address, 'ipv6');
  }
  return true; // not an address at all: refuse rather than guess
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
