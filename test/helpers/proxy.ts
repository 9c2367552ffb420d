import net from 'node:net';
import type { Test } from 'tap';

export interface CuttableProxy {
  /** The database URL through the proxy. */
  url: string;
  /** Drops every open connection and refuses new ones until restore(). */
  cut(): void;
  restore(): void;
}

/** A TCP proxy in front of the PostgreSQL of `databaseUrl` that a test can cut and restore. */
export async function cuttableProxy(t: Test, databaseUrl: string): Promise<CuttableProxy> {
  const target = new URL(databaseUrl);
  let up = true;
  const sockets = new Set<net.Socket>();
  const proxy = net.createServer((socket) => {
    if (!up) return socket.destroy();
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    sockets.add(socket).add(upstream);
    socket.pipe(upstream).pipe(socket);
    const drop = () => {
      socket.destroy();
      upstream.destroy();
      sockets.delete(socket);
      sockets.delete(upstream);
    };
    socket.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => proxy.close(() => r())));
  const proxied = new URL(databaseUrl);
  proxied.host = `127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
  return {
    url: proxied.toString(),
    cut() {
      up = false;
      for (const s of sockets) s.destroy();
    },
    restore() {
      up = true;
    },
  };
}
