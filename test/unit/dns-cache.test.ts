import t from 'tap';
import { DnsAnswerCache } from '../../server/integrations/dns.js';

/** Mail authentication's DNS answers, kept per process as a caching resolver keeps them. */

function counting(answer: () => Promise<unknown>) {
  const ask = () => {
    ask.calls += 1;
    return answer();
  };
  ask.calls = 0;
  return ask;
}

const failing = (code: string) => () => Promise.reject(Object.assign(new Error(code), { code }));

t.test('an answer is kept for its time, and lookups of one name at once share one query', async (t) => {
  let now = 1_000;
  const cache = new DnsAnswerCache(60_000, 100, () => now);
  const ask = counting(async () => [['v=DMARC1; p=reject']]);
  const [a, b] = await Promise.all([cache.lookup('TXT _dmarc.example.net', ask), cache.lookup('TXT _dmarc.example.net', ask)]);
  t.same(a, [['v=DMARC1; p=reject']]);
  t.same(b, a);
  t.equal(ask.calls, 1, 'one query for two lookups at once');
  now += 59_999;
  await cache.lookup('TXT _dmarc.example.net', ask);
  t.equal(ask.calls, 1, 'kept within its time');
  now += 1;
  await cache.lookup('TXT _dmarc.example.net', ask);
  t.equal(ask.calls, 2, 'asked again once its time is up');
  await cache.lookup('TXT _dmarc.other.example', ask);
  t.equal(ask.calls, 3, 'another name is another question');
});

t.test('"no such record" is kept; a failure that may pass is not', async (t) => {
  const cache = new DnsAnswerCache(60_000, 100, () => 0);
  const absent = counting(failing('ENOTFOUND'));
  await t.rejects(cache.lookup('TXT _dmarc.nobody.example', absent), { code: 'ENOTFOUND' });
  await t.rejects(cache.lookup('TXT _dmarc.nobody.example', absent), { code: 'ENOTFOUND' });
  t.equal(absent.calls, 1, 'the absence is kept');

  const timeout = counting(failing('ETIMEOUT'));
  await t.rejects(cache.lookup('TXT _dmarc.slow.example', timeout), { code: 'ETIMEOUT' });
  const recovered = counting(async () => [['v=DMARC1; p=none']]);
  t.same(await cache.lookup('TXT _dmarc.slow.example', recovered), [['v=DMARC1; p=none']], 'asked again after a timeout');
  t.equal(recovered.calls, 1);
});

t.test('at most maxEntries answers: the oldest go first', async (t) => {
  const cache = new DnsAnswerCache(60_000, 2, () => 0);
  const ask = counting(async () => []);
  await cache.lookup('A one.example', ask);
  await cache.lookup('A two.example', ask);
  await cache.lookup('A three.example', ask);
  t.equal(ask.calls, 3);
  await cache.lookup('A three.example', ask);
  await cache.lookup('A two.example', ask);
  t.equal(ask.calls, 3, 'the two newest are kept');
  await cache.lookup('A one.example', ask);
  t.equal(ask.calls, 4, 'the oldest was let go');
});
