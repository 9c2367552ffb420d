import { Readable } from 'node:stream';
import t from 'tap';
import { ClamdScanner, ScannerUnavailable, scannerFromConfig } from '../../server/integrations/clamd.js';
import { freePort } from '../../server/integrations/embedded-postgres.js';
import { EICAR, EICAR_SIGNATURE, noClamd, startClamd } from '../helpers/clamd.js';

/**
 * The clamd client against a real clamd of the test's own (Debian's clamav-daemon, with a
 * one-signature database): clean bytes, the EICAR test file, and a clamd that is not there or
 * stopped answering. Skipped, saying why, where clamd is not installed.
 */

t.test('scanning off: no scanner; one way to reach clamd', async (t) => {
  const off = { clamdSocket: null, clamdHost: null, clamdPort: 3310, timeoutMs: 1000, scanFailure: 'refuse' as const };
  t.equal(scannerFromConfig({ scanning: off }), null);
  t.same((scannerFromConfig({ scanning: { ...off, clamdHost: 'av.internal' } }) as ClamdScanner).address, { host: 'av.internal', port: 3310 });
  t.same((scannerFromConfig({ scanning: { ...off, clamdSocket: '/run/clamav/clamd.ctl' } }) as ClamdScanner).address, { socket: '/run/clamav/clamd.ctl' });
});

t.test('nothing listening: no verdict, at once', async (t) => {
  const scanner = new ClamdScanner({ host: '127.0.0.1', port: await freePort() }, 5000);
  await t.rejects(scanner.scan(Readable.from([Buffer.from('hello')])), ScannerUnavailable);
  await t.rejects(scanner.ping(), /ECONNREFUSED/);
});

t.test('a real clamd', { skip: noClamd() }, async (t) => {
  const clamd = await startClamd(t);
  const tcp = new ClamdScanner({ host: clamd.host, port: clamd.port }, 5000);
  const unix = new ClamdScanner({ socket: clamd.socket }, 5000);

  for (const [name, scanner] of [
    ['TCP', tcp],
    ['Unix socket', unix],
  ] as const) {
    t.test(`${name}: clean bytes, an empty file, EICAR anywhere in a file`, async (t) => {
      await scanner.ping();
      t.same(await scanner.scan(Readable.from([Buffer.from('just a letter\n')])), { infected: false });
      t.same(await scanner.scan(Readable.from([])), { infected: false }, 'an empty file is clean, not an unknown command');
      t.same(await scanner.scan(Readable.from([Buffer.from(EICAR)])), { infected: true, signature: EICAR_SIGNATURE });
      // Split across chunks and after 3 MB of clean bytes: found all the same.
      const big = [Buffer.alloc(3 * 1024 * 1024, 'a'), Buffer.from(EICAR.slice(0, 20)), Buffer.from(EICAR.slice(20))];
      t.same(await scanner.scan(Readable.from(big)), { infected: true, signature: EICAR_SIGNATURE });
    });
  }

  t.test('a clamd that accepts and never answers: no verdict once the deadline passes', async (t) => {
    const hasty = new ClamdScanner({ host: clamd.host, port: clamd.port }, 300);
    clamd.pause();
    try {
      const started = Date.now();
      await t.rejects(hasty.scan(Readable.from([Buffer.from('hello')])), { name: 'ScannerUnavailable', message: /within 300 ms/ });
      await t.rejects(hasty.ping(), ScannerUnavailable);
      t.ok(Date.now() - started < 5000, 'given up at the deadline');
    } finally {
      clamd.resume();
    }
    t.same(await tcp.scan(Readable.from([Buffer.from('again')])), { infected: false }, 'answering again');
  });

  t.test('a file past clamd’s StreamMaxLength is no verdict, not clean', async (t) => {
    // 101 MB is over the test clamd's 100M limit.
    const chunk = Buffer.alloc(1024 * 1024, 'b');
    const chunks = Array.from({ length: 101 }, () => chunk);
    await t.rejects(tcp.scan(Readable.from(chunks)), { name: 'ScannerUnavailable', message: /size limit/ });
  });
});
