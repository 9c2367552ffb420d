import t from 'tap';
import { newId, normalizeBrandId } from '../../server/core/ids.js';
import { requestIdFor } from '../../server/core/http.js';
import { validationErrors } from '../../server/core/validation.js';
import { PATTERNS } from '../../server/core/schemas.js';

t.test('ids are prefixed, 26 base32 characters, and sort by creation time', async (t) => {
  const id = newId('tkt');
  t.match(id, /^tkt_[0-9a-hjkmnp-tv-z]{26}$/);
  const earlier = newId('tkt', Date.UTC(2026, 0, 1));
  const later = newId('tkt', Date.UTC(2026, 0, 1) + 1);
  t.ok(earlier < later, 'one millisecond later sorts later');
  const many = new Set(Array.from({ length: 10_000 }, () => newId('x', 0)));
  t.equal(many.size, 10_000, 'no collisions within one millisecond');
});

t.test('ws_ brand ids are the workspace spelling of br_ ids', async (t) => {
  t.equal(normalizeBrandId('ws_01abc'), 'br_01abc');
  t.equal(normalizeBrandId('br_01abc'), 'br_01abc');
  t.equal(normalizeBrandId('tkt_01abc'), 'tkt_01abc');
});

t.test('request ids: sane incoming ones are kept, anything else is replaced', async (t) => {
  t.equal(requestIdFor({ headers: { 'x-request-id': 'abc-123_x.y:z' } }), 'abc-123_x.y:z');
  t.match(requestIdFor({ headers: { 'x-request-id': 'x'.repeat(129) } }), /^req_/);
  t.match(requestIdFor({ headers: { 'x-request-id': 'a\nb' } }), /^req_/);
  t.match(requestIdFor({ headers: { 'x-request-id': ['a', 'b'] } }), /^req_/);
  t.match(requestIdFor({ headers: {} }), /^req_/);
});

t.test('validation errors name the field and say what is wrong', async (t) => {
  const errors = validationErrors([
    { keyword: 'required', instancePath: '', params: { missingProperty: 'name' }, schemaPath: '', message: "must have required property 'name'" },
    { keyword: 'additionalProperties', instancePath: '/settings', params: { additionalProperty: 'x' }, schemaPath: '', message: '' },
    { keyword: 'type', instancePath: '/url', params: {}, schemaPath: '', message: 'must be string' },
    { keyword: 'type', instancePath: '/url', params: {}, schemaPath: '', message: 'must be null' },
    { keyword: 'anyOf', instancePath: '/url', params: {}, schemaPath: '', message: 'must match a schema in anyOf' },
    { keyword: 'enum', instancePath: '/csatType', params: { allowedValues: ['thumbs', 'scale5'] }, schemaPath: '', message: '' },
  ]);
  t.same(errors, [
    { field: 'name', message: 'is required' },
    { field: 'settings.x', message: 'is not a known field' },
    { field: 'url', message: 'must be string' },
    { field: 'csatType', message: 'must be one of: thumbs, scale5' },
  ]);
});

t.test('a field that takes a set of values names them; a union with other kinds keeps its own message', async (t) => {
  const constant = (path: string, allowedValue: string) => ({
    keyword: 'const',
    instancePath: path,
    params: { allowedValue },
    schemaPath: '',
    message: 'must be equal to constant',
  });
  const errors = validationErrors([
    constant('/sort', 'createdAt'),
    constant('/sort', 'title'),
    { keyword: 'anyOf', instancePath: '/sort', params: {}, schemaPath: '', message: '' },
    constant('/priority', 'low'),
    constant('/priority', 'high'),
    { keyword: 'type', instancePath: '/priority', params: { type: 'null' }, schemaPath: '', message: 'must be null' },
    { keyword: 'anyOf', instancePath: '/priority', params: {}, schemaPath: '', message: '' },
    constant('/object', 'ticket'),
    constant('/assigneeId', 'unassigned'),
    { keyword: 'pattern', instancePath: '/assigneeId', params: {}, schemaPath: '', message: 'must match pattern "^mem_"' },
  ]);
  t.same(errors, [
    { field: 'sort', message: 'must be one of: createdAt, title' },
    { field: 'priority', message: 'must be one of: low, high (or null)' },
    { field: 'object', message: 'must be ticket' },
    { field: 'assigneeId', message: 'must be equal to constant' },
  ]);
});

t.test("the shared patterns are explained in words; any other keeps ajv's message", async (t) => {
  const pattern = (path: string, p: string) => ({ keyword: 'pattern', instancePath: path, params: { pattern: p }, schemaPath: '', message: `must match pattern "${p}"` });
  t.same(
    validationErrors([
      pattern('/email', PATTERNS.email),
      pattern('/title', PATTERNS.notBlank),
      pattern('/color', PATTERNS.hexColor),
      pattern('/url', PATTERNS.httpUrl),
      pattern('/origin', PATTERNS.origin),
      pattern('/start', PATTERNS.timeOfDay),
      pattern('/prefix', '^[A-Za-z0-9]+$'),
    ]),
    [
      { field: 'email', message: 'must be an email address' },
      { field: 'title', message: 'must not be blank' },
      { field: 'color', message: 'must be a hex colour such as #6b7280' },
      { field: 'url', message: 'must be an http:// or https:// URL' },
      { field: 'origin', message: 'must be an origin such as https://app.example.com (no path)' },
      { field: 'start', message: 'must be a time of day as HH:MM (00:00-23:59)' },
      { field: 'prefix', message: 'must match pattern "^[A-Za-z0-9]+$"' },
    ],
  );
});

t.test('ids made in the same millisecond still sort in creation order', async (t) => {
  const at = Date.UTC(2026, 5, 1);
  const ids = Array.from({ length: 5000 }, () => newId('br', at));
  t.same([...ids].sort(), ids, 'sorted order is creation order');
  t.equal(new Set(ids).size, ids.length);
});

t.test('a nullable field with a bad value reports the real problem, not "must be null"', async (t) => {
  const errors = validationErrors([
    { keyword: 'required', instancePath: '/slaBusinessHours', params: { missingProperty: 'start' }, schemaPath: '', message: '' },
    { keyword: 'type', instancePath: '/slaBusinessHours', params: { type: 'null' }, schemaPath: '', message: 'must be null' },
    { keyword: 'anyOf', instancePath: '/slaBusinessHours', params: {}, schemaPath: '', message: '' },
    { keyword: 'type', instancePath: '/fromName', params: { type: 'null' }, schemaPath: '', message: 'must be null' },
  ]);
  t.same(errors, [
    { field: 'slaBusinessHours.start', message: 'is required' },
    { field: 'fromName', message: 'must be null' },
  ]);
});
