import t from 'tap';
import { assertErrorShape, assertNotFound, client, makeBrand, type Signup, signup, testApp, servicesOf } from '../helpers/app.js';
import { tenantCtx, systemCtx } from '../../server/core/context.js';
import * as tagService from '../../server/domains/tags/service.js';

// Every test signs up its own account: lift the per-hour signup limit for this file.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const anonymous = client(app);

const PREFIXES = ['/v1/brands', '/v1/workspaces'] as const;
const TAG_ID = /^tag_[0-9a-z]{26}$/;

type Call = Signup['live'];

let seq = 0;

async function makeTag(call: Call, brandId: string, body: Record<string, unknown> = {}) {
  const res = await call('POST', `/v1/brands/${brandId}/tags`, { name: `tag-${++seq}`, ...body });
  if (res.status !== 201) throw new Error(`tag create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; name: string; color: string };
}

/** Every tag route, with a valid body, for one brand and two of its tags. */
function everyRoute(prefix: string, brandId: string, tagId: string, otherTagId: string): [string, string, unknown][] {
  const base = `${prefix}/${brandId}/tags`;
  return [
    ['GET', base, undefined],
    ['POST', base, { name: 'fresh' }],
    ['GET', `${base}/stats`, undefined],
    ['GET', `${base}/${tagId}`, undefined],
    ['PATCH', `${base}/${tagId}`, { name: 'renamed' }],
    ['POST', `${base}/${tagId}/merge`, { sourceTagIds: [otherTagId] }],
    ['POST', `${base}/merge`, { targetTagId: tagId, sourceTagIds: [otherTagId] }],
    ['DELETE', `${base}/${tagId}`, undefined],
  ];
}

const tagRows = async (brandId: string) => Number((await db('tags').where({ brandId }).count({ n: '*' }))[0]!.n);
const ids = (list: { id: string }[]) => list.map((x) => x.id);

for (const prefix of PREFIXES) {
  t.test(`${prefix}: create, list, get, update, delete`, async (t) => {
    const owner = await signup(app);
    const brand = await makeBrand(owner.live);
    const base = `${prefix}/${brand.id}/tags`;

    const vip = await owner.live('POST', base, { name: ' VIP ', color: '#aa00FF' });
    t.equal(vip.status, 201);
    t.match(vip.body.id, TAG_ID, 'tag_ id');
    t.equal(vip.body.object, 'tag');
    t.equal(vip.body.brandId, brand.id);
    t.equal(vip.body.name, 'VIP', 'name is trimmed');
    t.equal(vip.body.color, '#aa00FF');
    t.ok(!Number.isNaN(Date.parse(vip.body.createdAt)));
    t.ok(!Number.isNaN(Date.parse(vip.body.updatedAt)));

    const bug = await owner.live('POST', base, { name: 'bug' });
    t.equal(bug.status, 201, 'name only, as the ticket page sends it');
    t.equal(bug.body.color, '#6b7280', 'default colour');
    const apple = await owner.live('POST', base, { name: 'Apple', color: null });
    t.equal(apple.body.color, '#6b7280', 'null colour means the default');

    const listed = await owner.live('GET', base);
    t.equal(listed.status, 200);
    t.ok(Array.isArray(listed.body), 'bare array');
    t.same(ids(listed.body), [apple.body.id, bug.body.id, vip.body.id], 'by name, ignoring case');

    const got = await owner.live('GET', `${base}/${vip.body.id}`);
    t.equal(got.status, 200);
    t.same(got.body, vip.body);

    const patched = await owner.live('PATCH', `${base}/${vip.body.id}`, { name: 'vip-customer', color: '#000000' });
    t.equal(patched.status, 200);
    t.equal(patched.body.name, 'vip-customer');
    t.equal(patched.body.color, '#000000');
    t.equal(patched.body.createdAt, vip.body.createdAt);
    t.equal((await owner.live('GET', `${base}/${vip.body.id}`)).body.name, 'vip-customer', 'stored');
    t.equal((await owner.live('PATCH', `${base}/${bug.body.id}`, { name: 'BUG' })).status, 200, 'a new case of its own name is fine');

    const deleted = await owner.live('DELETE', `${base}/${vip.body.id}`);
    t.equal(deleted.status, 200);
    t.same(deleted.body, { success: true });
    assertNotFound(t, await owner.live('GET', `${base}/${vip.body.id}`), 'deleted tag');
    assertNotFound(t, await owner.live('DELETE', `${base}/${vip.body.id}`), 'deleted twice');
    t.same(ids((await owner.live('GET', base)).body), [apple.body.id, bug.body.id]);
  });
}

t.test('bad input is 400 with the field named', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}/tags`;
  const tag = await makeTag(owner.live, brand.id);
  const other = await makeTag(owner.live, brand.id);
  const bad: [string, Record<string, unknown>, string, boolean][] = [
    ['colour word', { name: 'a', color: 'red' }, 'color', true],
    ['colour with a non-hex digit', { name: 'a', color: '#12345g' }, 'color', true],
    ['colour without #', { name: 'a', color: '123456' }, 'color', true],
    ['empty name', { name: '' }, 'name', true],
    ['blank name', { name: '  ' }, 'name', true],
    ['too long name', { name: 'x'.repeat(101) }, 'name', true],
    ['missing name', { color: '#123456' }, 'name', false],
    ['unknown field', { name: 'a', description: 'no such field on tags' }, 'description', true],
    ['number as name', { name: 42 }, 'name', true],
    ['array as colour', { name: 'a', color: ['#123456'] }, 'color', true],
  ];
  for (const [label, body, field, onPatch] of bad) {
    const res = await owner.live('POST', base, body);
    assertErrorShape(t, res, 400, 'validation_failed');
    t.ok(
      res.body.errors.some((e: { field: string }) => e.field === field),
      `POST ${label}: names ${field}`,
    );
    if (!onPatch) continue;
    const patch = await owner.live('PATCH', `${base}/${tag.id}`, body);
    assertErrorShape(t, patch, 400, 'validation_failed');
    t.ok(
      patch.body.errors.some((e: { field: string }) => e.field === field),
      `PATCH ${label}: names ${field}`,
    );
  }
  t.equal((await owner.live('PATCH', `${base}/${tag.id}`, {})).status, 400, 'PATCH with nothing to change');
  const merges: [string, string, unknown][] = [
    ['empty sources', `${base}/${tag.id}/merge`, { sourceTagIds: [] }],
    ['sources not an array', `${base}/${tag.id}/merge`, { sourceTagIds: other.id }],
    ['unknown field', `${base}/${tag.id}/merge`, { sourceTagIds: [other.id], force: true }],
    ['no sources', `${base}/${tag.id}/merge`, {}],
    ['dashboard: no target', `${base}/merge`, { sourceTagIds: [other.id] }],
    ['dashboard: empty sources', `${base}/merge`, { targetTagId: tag.id, sourceTagIds: [] }],
    ['dashboard: target a number', `${base}/merge`, { targetTagId: 7, sourceTagIds: [other.id] }],
  ];
  for (const [label, url, body] of merges) {
    const res = await owner.live('POST', url, body);
    t.equal(res.status, 400, `merge ${label}: 400`);
    assertErrorShape(t, res, 400, 'validation_failed');
  }
  t.equal(await tagRows(brand.id), 2, 'nothing stored or merged away');
  t.equal((await owner.live('GET', `${base}/${tag.id}`)).body.name, tag.name, 'nothing changed');
});

t.test('names are unique per brand ignoring case: 409 tag_name_taken', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const other = await makeBrand(owner.live, 'Other');
  const base = `/v1/brands/${brand.id}/tags`;
  await makeTag(owner.live, brand.id, { name: 'Urgent' });
  const bug = await makeTag(owner.live, brand.id, { name: 'bug' });
  for (const name of ['Urgent', 'urgent', 'URGENT', ' uRGENT ']) {
    assertErrorShape(t, await owner.live('POST', base, { name }), 409, 'tag_name_taken');
  }
  assertErrorShape(t, await owner.live('PATCH', `${base}/${bug.id}`, { name: 'URGENT' }), 409, 'tag_name_taken');
  t.equal((await owner.live('GET', `${base}/${bug.id}`)).body.name, 'bug', 'failed rename changed nothing');
  t.equal(await tagRows(brand.id), 2);
  t.equal((await owner.live('POST', `/v1/brands/${other.id}/tags`, { name: 'urgent' })).status, 201, 'same name in another brand is fine');
  const testBrand = await makeBrand(owner.test);
  t.equal((await owner.test('POST', `/v1/brands/${testBrand.id}/tags`, { name: 'Urgent' })).status, 201, 'and in test mode');
});

t.test('concurrent creates of one name: one 201, the rest 409', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const names = ['Billing', 'billing', 'BILLING', 'Billing', 'bIlling', 'billinG'];
  const results = await Promise.all(names.map((name) => owner.live('POST', `/v1/brands/${brand.id}/tags`, { name })));
  t.same(results.map((r) => r.status).sort(), [201, 409, 409, 409, 409, 409]);
  for (const r of results.filter((r) => r.status === 409)) t.equal(r.body.code, 'tag_name_taken');
  t.equal(await tagRows(brand.id), 1, 'one row stored');
});

t.test('401 without a key or with a bad key, on every route', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const tag = await makeTag(owner.live, brand.id);
  const src = await makeTag(owner.live, brand.id);
  const bogus = client(app, 'sk_test_not_a_real_key');
  for (const prefix of PREFIXES) {
    for (const [method, url, body] of everyRoute(prefix, brand.id, tag.id, src.id)) {
      assertErrorShape(t, await anonymous(method, url, body), 401, 'missing_credentials');
      assertErrorShape(t, await bogus(method, url, body), 401, 'invalid_api_key');
    }
  }
  t.equal(await tagRows(brand.id), 2, 'nothing created, merged or deleted');
});

t.test('another account, the other mode, and a key limited to another brand all get 404 on every route', async (t) => {
  const owner = await signup(app);
  const intruder = await signup(app);
  const brand = await makeBrand(owner.live);
  const otherBrand = await makeBrand(owner.live, 'Other');
  const tag = await makeTag(owner.live, brand.id);
  const src = await makeTag(owner.live, brand.id);
  const limitedKey = (await owner.live('POST', '/v1/accounts/me/api-keys', { name: 'other only', brandIds: [otherBrand.id] })).body.key;
  const limited = client(app, limitedKey);
  const callers: [string, Call][] = [
    ['another account', intruder.live],
    ['another account (test)', intruder.test],
    ['test mode of the owner', owner.test],
    ['key of another brand', limited],
  ];
  for (const prefix of PREFIXES) {
    for (const [who, call] of callers) {
      for (const [method, url, body] of everyRoute(prefix, brand.id, tag.id, src.id)) {
        assertNotFound(t, await call(method, url, body), `${who}: ${method} ${url}`);
      }
    }
  }
  t.equal(await tagRows(brand.id), 2, 'nothing created, merged or deleted');
  t.equal((await owner.live('GET', `/v1/brands/${brand.id}/tags/${tag.id}`)).body.name, tag.name, 'nothing renamed');
  t.equal((await limited('POST', `/v1/workspaces/${otherBrand.id}/tags`, { name: 'mine' })).status, 201, 'limited key works on its brand');
});

t.test("another brand's tag id is 404 under this brand, also inside merge bodies", async (t) => {
  const owner = await signup(app);
  const a = await makeBrand(owner.live, 'A');
  const b = await makeBrand(owner.live, 'B');
  const tagA = await makeTag(owner.live, a.id);
  const tagA2 = await makeTag(owner.live, a.id);
  const tagB = await makeTag(owner.live, b.id);
  for (const prefix of PREFIXES) {
    const base = `${prefix}/${a.id}/tags`;
    assertNotFound(t, await owner.live('GET', `${base}/${tagB.id}`), 'GET');
    assertNotFound(t, await owner.live('PATCH', `${base}/${tagB.id}`, { name: 'hijacked' }), 'PATCH');
    assertNotFound(t, await owner.live('DELETE', `${base}/${tagB.id}`), 'DELETE');
    assertNotFound(t, await owner.live('POST', `${base}/${tagA.id}/merge`, { sourceTagIds: [tagA2.id, tagB.id] }), 'foreign source');
    assertNotFound(t, await owner.live('POST', `${base}/${tagB.id}/merge`, { sourceTagIds: [tagA.id] }), 'foreign target in path');
    assertNotFound(t, await owner.live('POST', `${base}/merge`, { targetTagId: tagA.id, sourceTagIds: [tagB.id] }), 'dashboard: foreign source');
    assertNotFound(t, await owner.live('POST', `${base}/merge`, { targetTagId: tagB.id, sourceTagIds: [tagA.id] }), 'dashboard: foreign target');
    assertNotFound(t, await owner.live('POST', `${base}/merge`, { targetTagId: tagA.id, sourceTagIds: ['tag_unknown'] }), 'unknown source');
  }
  t.equal(await tagRows(a.id), 2, 'no tag of brand A was merged away');
  t.equal(await tagRows(b.id), 1, 'brand B tag untouched');
  t.equal((await owner.live('GET', `/v1/brands/${b.id}/tags/${tagB.id}`)).body.name, tagB.name);
});

for (const spelling of ['sdk', 'dashboard'] as const) {
  t.test(`merge (${spelling} spelling) removes the sources and returns the target`, async (t) => {
    const owner = await signup(app);
    const brand = await makeBrand(owner.live);
    const base = `/v1/workspaces/${brand.id}/tags`;
    const target = await makeTag(owner.live, brand.id, { name: 'billing', color: '#123456' });
    const s1 = await makeTag(owner.live, brand.id, { name: 'invoice' });
    const s2 = await makeTag(owner.live, brand.id, { name: 'payments' });
    const bystander = await makeTag(owner.live, brand.id, { name: 'zzz' });
    const merge = (targetId: string, sourceTagIds: string[]) =>
      spelling === 'sdk' ? owner.live('POST', `${base}/${targetId}/merge`, { sourceTagIds }) : owner.live('POST', `${base}/merge`, { targetTagId: targetId, sourceTagIds });

    assertErrorShape(t, await merge(target.id, [s1.id, target.id]), 400, 'merge_into_self');
    assertErrorShape(t, await merge(target.id, [target.id]), 400, 'merge_into_self');
    t.equal(await tagRows(brand.id), 4, 'a refused merge deletes nothing');

    const res = await merge(target.id, [s1.id, s2.id, s1.id]);
    t.equal(res.status, 200);
    t.equal(res.body.id, target.id, 'returns the target');
    t.equal(res.body.name, 'billing');
    t.equal(res.body.color, '#123456');
    t.same(ids((await owner.live('GET', base)).body), [target.id, bystander.id], 'sources are gone, others stay');
    assertNotFound(t, await owner.live('GET', `${base}/${s1.id}`), 'merged source');
    assertNotFound(t, await merge(target.id, [s2.id]), 'merging an already merged source');
    t.equal((await owner.live('POST', base, { name: 'Invoice' })).status, 201, 'a merged name is free again');
  });
}

t.test('stats list every tag with ticketCount 0', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const other = await makeBrand(owner.live, 'Other');
  for (const prefix of PREFIXES) t.same((await owner.live('GET', `${prefix}/${brand.id}/tags/stats`)).body, {}, `${prefix}: empty`);
  const t1 = await makeTag(owner.live, brand.id, { color: '#abcdef' });
  const t2 = await makeTag(owner.live, brand.id);
  await makeTag(owner.live, other.id);
  for (const prefix of PREFIXES) {
    const res = await owner.live('GET', `${prefix}/${brand.id}/tags/stats`);
    t.equal(res.status, 200);
    t.same(Object.keys(res.body).sort(), [t1.id, t2.id].sort(), "exactly this brand's tags");
    t.equal(res.body[t1.id].ticketCount, 0);
    t.equal(res.body[t2.id].ticketCount, 0);
    t.equal(res.body[t1.id].color, '#abcdef');
  }
});

t.test('findOrCreateByNames matches ignoring case, creates the rest once, and stays in the brand', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const other = await makeBrand(owner.live, 'Other');
  const existing = await makeTag(owner.live, brand.id, { name: 'Billing' });
  const foreign = await makeTag(owner.live, other.id, { name: 'refund' });
  const ctx = tenantCtx(systemCtx(servicesOf(db)), owner.accountId, true);

  const found = await tagService.findOrCreateByNames(ctx, brand.id, ['billing', ' Refund ', 'REFUND', 'new-one']);
  t.same(
    found.map((x) => x.name),
    ['Billing', 'Refund', 'new-one'],
    'one per distinct name, first spelling wins',
  );
  t.equal(found[0]!.id, existing.id, 'existing tag reused');
  t.not(found[1]!.id, foreign.id, "another brand's tag is never used");
  t.equal(found[1]!.brandId, brand.id);
  t.equal(await tagRows(brand.id), 3);

  const concurrent = await Promise.all([1, 2, 3, 4].map(() => tagService.findOrCreateByNames(ctx, brand.id, ['race'])));
  t.equal(new Set(concurrent.map((r) => r[0]!.id)).size, 1, 'concurrent callers get the same tag');
  t.equal(await tagRows(brand.id), 4);

  const statusOf = (p: Promise<unknown>) =>
    p.then(
      () => 'resolved',
      (err: { statusCode?: number }) => err.statusCode,
    );
  t.equal(await statusOf(tagService.findOrCreateByNames(ctx, brand.id, ['   '])), 400, 'blank name refused');
  const testCtx = tenantCtx(systemCtx(servicesOf(db)), owner.accountId, false);
  t.equal(await statusOf(tagService.findOrCreateByNames(testCtx, brand.id, ['x'])), 404, 'the other mode cannot reach the brand');
  t.equal(await statusOf(tagService.requireTags(ctx, brand.id, [existing.id, foreign.id])), 404, "requireTags refuses another brand's tag");
  t.equal((await tagService.requireTags(ctx, brand.id, [existing.id])).length, 1);
});

t.test('brand delete preview counts tags; confirm removes them', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const keep = await makeBrand(owner.live, 'Keep');
  await makeTag(owner.live, brand.id);
  await makeTag(owner.live, brand.id);
  await makeTag(owner.live, brand.id);
  await makeTag(owner.live, keep.id);

  const preview = await owner.live('DELETE', `/v1/workspaces/${brand.id}`);
  t.equal(preview.status, 200);
  t.equal(preview.body.deleted, false);
  t.equal(preview.body.tagCount, 3);
  t.equal(preview.body.categoryCount, 0);
  t.equal(await tagRows(brand.id), 3, 'preview deletes nothing');

  const confirmed = await owner.live('DELETE', `/v1/brands/${brand.id}?confirm=true`);
  t.equal(confirmed.status, 200);
  t.equal(confirmed.body.deleted, true);
  t.equal(confirmed.body.tagCount, 3);
  t.equal(await tagRows(brand.id), 0, 'tags went with the brand');
  t.equal(await tagRows(keep.id), 1, 'other brands keep theirs');
});

t.test('the routes are in the OpenAPI document', async (t) => {
  const doc = (await anonymous('GET', '/v1/openapi.json')).body;
  for (const prefix of PREFIXES) {
    for (const path of ['/tags', '/tags/stats', '/tags/merge', '/tags/{tagId}', '/tags/{targetId}/merge']) {
      t.ok(doc.paths[`${prefix}/{brandId}${path}`], `${prefix}/{brandId}${path}`);
    }
  }
});
