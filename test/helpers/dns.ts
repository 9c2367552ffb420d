import dns2 from 'dns2';
import type { Test } from 'tap';

type Published = { type: 'TXT'; value: string } | { type: 'CNAME'; value: string } | { type: 'MX'; value: string; priority: number };

/**
 * A DNS server on a loopback UDP port, answering what the test publishes (TXT, MX, CNAME) and
 * nothing else: what configuration's dnsServers points domain verification and DKIM checks at.
 */
export async function dnsServer(t: Test) {
  const zone = new Map<string, Published[]>();
  let silent = false;
  const { Packet } = dns2;
  const server = dns2.createServer({
    udp: true,
    handle: (request, send) => {
      if (silent) return;
      const response = Packet.createResponseFromRequest(request);
      // The typings want parsed resources; the encoder takes plain records.
      const answer = (record: object) => response.answers.push(record as never);
      for (const question of request.questions) {
        const name = question.name.toLowerCase();
        for (const record of zone.get(name) ?? []) {
          const base = { name: question.name, class: Packet.CLASS.IN, ttl: 1 };
          // A TXT string holds 255 bytes: a DKIM key is published in several, as real zones do.
          if (record.type === 'TXT' && question.type === Packet.TYPE.TXT) answer({ ...base, type: Packet.TYPE.TXT, data: record.value.match(/.{1,255}/g) ?? [''] });
          if (record.type === 'CNAME' && question.type === Packet.TYPE.CNAME) answer({ ...base, type: Packet.TYPE.CNAME, domain: record.value });
          if (record.type === 'MX' && question.type === Packet.TYPE.MX) answer({ ...base, type: Packet.TYPE.MX, exchange: record.value, priority: record.priority });
        }
      }
      send(response);
    },
  });
  const listening = await server.listen({ udp: { port: 0, address: '127.0.0.1' } });
  t.teardown(() => server.close());
  const port = listening.udp!.port;
  return {
    /** For dnsServers (TICKETD_DNS_SERVERS). */
    address: `127.0.0.1:${port}`,
    publish(name: string, record: Published): void {
      const key = name.toLowerCase();
      zone.set(key, [...(zone.get(key) ?? []), record]);
    },
    /** Silent: no question is answered (a DNS outage: lookups time out) until set back. */
    setSilent(value: boolean): void {
      silent = value;
    },
    /** Every record of the name gone (all names without one). */
    unpublish(name?: string): void {
      if (name === undefined) zone.clear();
      else zone.delete(name.toLowerCase());
    },
  };
}
