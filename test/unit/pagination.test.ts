import t from 'tap';
import { decodeCursor, encodeCursor } from '../../server/core/pagination.js';

const filters = { search: 'ann', sort: 'name', order: 'asc' };

t.test('a cursor carries its position back unchanged', async (t) => {
  t.same(decodeCursor(encodeCursor(['ann lee', 'cus_01'], filters), filters), ['ann lee', 'cus_01']);
  t.same(decodeCursor(encodeCursor([42, 'x_1'], filters), { order: 'asc', sort: 'name', search: 'ann' }), [42, 'x_1'], 'filter key order does not matter');
  t.same(decodeCursor(encodeCursor([null, 'x_1'], {}), {}), [null, 'x_1']);
});

t.test('an altered cursor is a 400 invalid_cursor', async (t) => {
  const cursor = encodeCursor(['ann', 'cus_01'], filters);
  const [payload, sum] = cursor.split('.');
  const forged = Buffer.from(JSON.stringify({ p: ['zzz', 'cus_99'], f: JSON.parse(Buffer.from(payload!, 'base64url').toString()).f })).toString('base64url');
  for (const bad of [`${forged}.${sum}`, `${payload}.x${sum!.slice(1)}`, 'garbage', '', `${cursor}.more`, 'a.b', '%%%.###']) {
    t.throws(() => decodeCursor(bad, filters), { statusCode: 400, code: 'invalid_cursor' }, `refuses ${JSON.stringify(bad).slice(0, 30)}`);
  }
});

t.test('a cursor reused with other filters is a 400 cursor_mismatch', async (t) => {
  const cursor = encodeCursor(['ann', 'cus_01'], filters);
  t.throws(() => decodeCursor(cursor, { ...filters, search: 'bob' }), { statusCode: 400, code: 'cursor_mismatch' });
  t.throws(() => decodeCursor(cursor, { ...filters, order: 'desc' }), { statusCode: 400, code: 'cursor_mismatch' });
});
