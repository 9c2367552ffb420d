import t from 'tap';
import { isNonPublicAddress } from '../../server/core/outbound.js';
import { dispatchSignature, signatureHeaders, standardWebhooksKey } from '../../server/worker/signing.js';

t.test('non-public addresses, IPv4 and IPv6', async (t) => {
  for (const a of [
    '127.0.0.1',
    '127.255.0.9',
    '10.0.0.1',
    '172.16.5.4',
    '172.31.255.255',
    '192.168.0.1',
    '169.254.169.254',
    '0.0.0.0',
    '100.64.1.1',
    '224.0.0.251',
    '255.255.255.255',
    '::1',
    '::',
    'fe80::1',
    'fc00::1',
    'fd12:3456::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:10.0.0.1',
    '::127.0.0.1',
    '64:ff9b::a9fe:a9fe',
    'not-an-ip',
  ])
    t.ok(isNonPublicAddress(a), `${a} is refused`);
  for (const a of ['93.184.215.14', '8.8.8.8', '172.32.0.1', '2606:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808']) t.notOk(isNonPublicAddress(a), `${a} is public`);
});

t.test('signing keys: whsec_ secrets are base64 keys, others their bytes', async (t) => {
  t.same(standardWebhooksKey('whsec_AAEC'), Buffer.from([0, 1, 2]));
  t.same(standardWebhooksKey('whsec_not base64!'), Buffer.from('whsec_not base64!'));
  t.same(standardWebhooksKey('plain-secret-1234'), Buffer.from('plain-secret-1234'));
  t.equal(
    dispatchSignature('key', 'The quick brown fox jumps over the lazy dog'),
    'sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8',
    'the RFC 4231-style known vector',
  );
  const headers = signatureHeaders(['whsec_AAEC', 'old-secret-0123456789'], 'dlv_1', 1700000000, '{}');
  t.same(Object.keys(headers).sort(), ['webhook-id', 'webhook-signature', 'webhook-timestamp', 'x-dispatch-signature']);
  t.match(headers['webhook-signature'], /^v1,[A-Za-z0-9+/]+=* v1,[A-Za-z0-9+/]+=*$/, 'one signature per secret');
  t.match(headers['x-dispatch-signature'], /^sha256=[0-9a-f]{64}$/);
});
