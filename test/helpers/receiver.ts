import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';

export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The raw body, exactly as sent. */
  body: string;
  at: number;
}

export interface Answer {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  /** Answer only after this long (the slow receiver). */
  delayMs?: number;
  /** Answer only once this settles (a receiver that hangs until the test lets it go). */
  until?: Promise<unknown>;
}

/** A loopback HTTP receiver that records every request and answers as `answer` says (default 200). */
export async function receiver(
  t: Test,
  answer: (req: Received) => Answer = () => ({}),
): Promise<{ url: string; received: Received[]; setAnswer(a: (req: Received) => Answer): void }> {
  const received: Received[] = [];
  let current = answer;
  const sockets = new Set<import('node:net').Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const got = { path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
      received.push(got);
      const a = current(got);
      const reply = () => {
        if (res.destroyed) return;
        res.writeHead(a.status ?? 200, a.headers ?? {});
        res.end(a.body ?? 'ok');
      };
      if (a.until) void a.until.then(reply, reply);
      else if (a.delayMs) setTimeout(reply, a.delayMs).unref();
      else reply();
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    setAnswer: (a) => {
      current = a;
    },
  };
}
