import t from 'tap';
import { assertErrorShape, assertNotFound, client, makeBrand, mustCreate, ownerWithBrand, servicesOf, signup, testApp } from '../helpers/app.js';
import { SIGN_IN_TEST_ENV, teamOf } from '../helpers/sign-in.js';

/** Web forms as the dashboard manages them: /v1/brands/{brandId}/forms (and the /v1/workspaces twin). */

const { app, db } = await testApp(t, SIGN_IN_TEST_ENV);
const TOKEN = /^ft_[0-9A-Za-z]{43}$/;
const FORM_ID = /^form_[0-9a-z]{26}$/;

for (const prefix of ['/v1/brands', '/v1/workspaces']) {
  t.test(`${prefix}: create, list, get, update, regenerate, delete`, async (t) => {
    const owner = await signup(app);
    const brand = await makeBrand(owner.live);
    const base = `${prefix}/${prefix === '/v1/workspaces' ? `ws_${brand.id.slice(3)}` : brand.id}/forms`;

    // What the dashboard sends on create: { name, successUrl? }.
    const created = await owner.live('POST', base, { name: '  Contact us ', successUrl: 'https://shop.example/thanks' });
    t.equal(created.status, 201, JSON.stringify(created.body));
    const form = created.body;
    t.match(form.id, FORM_ID);
    t.match(form.token, TOKEN, 'a token of 256 random bits');
    t.same(
      { ...form, id: undefined, token: undefined, createdAt: undefined, updatedAt: undefined },
      {
        id: undefined,
        object: 'form',
        brandId: brand.id,
        name: 'Contact us',
        token: undefined,
        successUrl: 'https://shop.example/thanks',
        errorUrl: null,
        thankYouMessage: null,
        fieldMapping: null,
        enabled: true,
        honeypotField: null,
        allowedOrigins: [],
        submissionCount: 0,
        lastSubmissionAt: null,
        createdAt: undefined,
        updatedAt: undefined,
      },
      "every field of the dashboard's FormToken, with its defaults",
    );

    const second = await mustCreate(owner.live, base, {
      name: 'Support',
      errorUrl: 'https://shop.example/oops',
      thankYouMessage: 'Thanks!',
      fieldMapping: { 'your-email': 'email', plan: 'customFields.plan' },
      enabled: false,
      honeypotField: 'website',
      allowedOrigins: ['https://Shop.example/', 'https://shop.example'],
    });
    t.match(second, { enabled: false, honeypotField: 'website', fieldMapping: { 'your-email': 'email', plan: 'customFields.plan' }, allowedOrigins: ['https://shop.example'] });
    t.not(second.token, form.token);

    const listed = await owner.live('GET', base);
    t.equal(listed.status, 200);
    t.same(
      listed.body.map((f: { id: string; token: string }) => [f.id, f.token]),
      [
        [form.id, form.token],
        [second.id, second.token],
      ],
      'a bare array, oldest first, tokens shown (the embed code)',
    );
    t.same((await owner.live('GET', `${base}/${form.id}`)).body, form);

    // The dashboard's two PATCH shapes: { enabled }, and { name, successUrl?, errorUrl?, thankYouMessage? } from its edit dialog, blanks meaning none.
    const disabled = await owner.live('PATCH', `${base}/${form.id}`, { enabled: false });
    t.equal(disabled.status, 200);
    t.equal(disabled.body.enabled, false);
    const edited = await owner.live('PATCH', `${base}/${form.id}`, { name: 'Contact', successUrl: '', errorUrl: 'https://shop.example/error', thankYouMessage: ' ' });
    t.equal(edited.status, 200, JSON.stringify(edited.body));
    t.match(edited.body, { name: 'Contact', successUrl: null, errorUrl: 'https://shop.example/error', thankYouMessage: null, enabled: false, token: form.token });
    t.ok(edited.body.updatedAt >= form.updatedAt);

    const regenerated = await owner.live('POST', `${base}/${form.id}/regenerate`);
    t.equal(regenerated.status, 200);
    t.match(regenerated.body.token, TOKEN);
    t.not(regenerated.body.token, form.token, 'a new token');
    t.equal((await owner.live('GET', `${base}/${form.id}`)).body.token, regenerated.body.token, 'and it is the one shown from now on');

    const deleted = await owner.live('DELETE', `${base}/${form.id}`);
    t.equal(deleted.status, 200);
    t.equal(deleted.body.id, form.id);
    assertNotFound(t, await owner.live('GET', `${base}/${form.id}`), 'a deleted form');
    assertNotFound(t, await owner.live('DELETE', `${base}/${form.id}`), 'deleted twice');
    assertNotFound(t, await owner.live('POST', `${base}/${form.id}/regenerate`), 'regenerating a deleted form');
    t.equal((await owner.live('GET', base)).body.length, 1);
  });
}

t.test('bad settings: 400 naming the field, nothing created or changed', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const forms = `${base}/forms`;
  assertErrorShape(t, await owner.live('POST', forms, {}), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', forms, { name: '   ' }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', forms, { name: 'x'.repeat(201) }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', forms, { name: 'A', token: 'ft_mine' }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', forms, { name: 'A', successUrl: 'javascript:alert(1)' }), 400, 'invalid_url');
  assertErrorShape(t, await owner.live('POST', forms, { name: 'A', errorUrl: '/relative' }), 400, 'invalid_url');
  assertErrorShape(t, await owner.live('POST', forms, { name: 'A', successUrl: 'https://user:pw@shop.example/' }), 400, 'invalid_url');
  const origin = await owner.live('POST', forms, { name: 'A', allowedOrigins: ['https://shop.example/contact'] });
  assertErrorShape(t, origin, 400, 'invalid_origin');
  t.match(origin.body.errors, [{ field: 'allowedOrigins/0' }]);
  assertErrorShape(t, await owner.live('POST', forms, { name: 'A', allowedOrigins: Array.from({ length: 51 }, (_, i) => `https://s${i}.example`) }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', forms, { name: 'A', fieldMapping: { email: 'priority' } }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', forms, { name: 'A', fieldMapping: { 'a b': 'email' } }), 400, 'invalid_request');
  const twice = await owner.live('POST', forms, { name: 'A', fieldMapping: { mail: 'email', other: 'email' } });
  assertErrorShape(t, twice, 400, 'invalid_request');
  assertErrorShape(t, await owner.live('POST', forms, { name: 'A', honeypotField: 'email' }), 400, 'invalid_request');
  assertErrorShape(t, await owner.live('POST', forms, { name: 'A', honeypotField: 'has space' }), 400, 'validation_failed');
  t.same((await owner.live('GET', forms)).body, [], 'nothing was created');

  const form = await mustCreate(owner.live, forms, { name: 'A', fieldMapping: { mail: 'email' }, honeypotField: 'website' });
  assertErrorShape(t, await owner.live('PATCH', `${forms}/${form.id}`, { honeypotField: 'mail' }), 400, 'invalid_request');
  assertErrorShape(t, await owner.live('PATCH', `${forms}/${form.id}`, { fieldMapping: { website: 'subject' } }), 400, 'invalid_request');
  assertErrorShape(t, await owner.live('PATCH', `${forms}/${form.id}`, { enabled: 'yes' }), 400, 'validation_failed');
  t.same((await owner.live('GET', `${forms}/${form.id}`)).body, form, 'unchanged');
  const mapped = await owner.live('PATCH', `${forms}/${form.id}`, { honeypotField: null, fieldMapping: null });
  t.match(mapped.body, { honeypotField: null, fieldMapping: null });
});

t.test('changes are in the brand audit log, without the token', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const form = await mustCreate(owner.live, `${base}/forms`, { name: 'Contact' });
  await owner.live('PATCH', `${base}/forms/${form.id}`, { name: 'Contact us', enabled: false });
  const regenerated = (await owner.live('POST', `${base}/forms/${form.id}/regenerate`)).body;
  await owner.live('DELETE', `${base}/forms/${form.id}`);
  const logs = (await owner.live('GET', `${base}/logs?entityType=form`)).body.data;
  t.same(
    logs.map((l: { event: string }) => l.event),
    ['form.deleted', 'form.token_regenerated', 'form.updated', 'form.created'],
  );
  t.match(logs[2].changes, { name: { old: 'Contact', new: 'Contact us' }, enabled: { old: true, new: false } });
  const text = JSON.stringify(logs);
  t.notOk(text.includes(form.token) || text.includes(regenerated.token), 'no token in the log');
});

t.test('access: other accounts, the other mode and a key limited to another brand get 404; forms of each brand stay apart', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const form = await mustCreate(owner.live, `${base}/forms`, { name: 'Contact' });
  const side = await makeBrand(owner.live, 'Side');
  const sideKey = await mustCreate(owner.live, '/v1/accounts/me/api-keys', { name: 'Side', brandIds: [side.id] });
  const limited = client(app, sideKey.key);
  const stranger = await signup(app);

  for (const [label, call] of [
    ['another account', stranger.live],
    ['the test mode', owner.test],
    ['a key limited to another brand', limited],
  ] as const) {
    assertNotFound(t, await call('GET', `${base}/forms`), `${label}: list`);
    assertNotFound(t, await call('POST', `${base}/forms`, { name: 'X' }), `${label}: create`);
    assertNotFound(t, await call('GET', `${base}/forms/${form.id}`), `${label}: get`);
    assertNotFound(t, await call('PATCH', `${base}/forms/${form.id}`, { enabled: false }), `${label}: update`);
    assertNotFound(t, await call('POST', `${base}/forms/${form.id}/regenerate`), `${label}: regenerate`);
    assertNotFound(t, await call('DELETE', `${base}/forms/${form.id}`), `${label}: delete`);
  }
  // The form's id under another brand of the same account.
  assertNotFound(t, await owner.live('GET', `/v1/brands/${side.id}/forms/${form.id}`), 'another brand of the owner');
  t.equal((await limited('GET', `/v1/brands/${side.id}/forms`)).status, 200, 'the limited key manages its own brand');
  t.match((await owner.live('GET', `${base}/forms/${form.id}`)).body, { id: form.id, enabled: true, token: form.token, brandId: brand.id }, 'untouched');
});

t.test('sessions: any member manages the forms of the brands assigned to them (like other brand settings); others are 404', async (t) => {
  const team = await teamOf(app, servicesOf(db));
  const first = `/v1/brands/${team.first.id}/forms`;
  const second = `/v1/brands/${team.second.id}/forms`;
  const made = await team.asMember('POST', first, { name: 'Member made' });
  t.equal(made.status, 201, 'a member creates in an assigned brand');
  t.equal((await team.asMember('PATCH', `${first}/${made.body.id}`, { enabled: false })).status, 200);
  t.equal((await team.asMember('POST', `${first}/${made.body.id}/regenerate`)).status, 200);
  assertNotFound(t, await team.asMember('GET', second), 'a brand not assigned');
  assertNotFound(t, await team.asMember('POST', second, { name: 'X' }), 'creating there');
  const adminForm = await team.asAdmin('POST', second, { name: 'Admin made' });
  t.equal(adminForm.status, 201, 'an admin reaches every brand');
  assertNotFound(t, await team.asMember('DELETE', `${second}/${adminForm.body.id}`), "the member cannot reach another brand's form");
  t.equal((await team.asOwner('DELETE', `${first}/${made.body.id}`)).status, 200);
});

t.test('deleting the brand takes its forms and their URLs with it', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const form = await mustCreate(owner.live, `${base}/forms`, { name: 'Contact' });
  t.equal((await owner.live('DELETE', `/v1/brands/${brand.id}?confirm=true`)).status, 200);
  const res = await client(app)('POST', `/v1/forms/${form.token}`, { email: 'a@example.com', subject: 'Hi', message: 'Hello' });
  assertErrorShape(t, res, 404, 'form_not_found');
});
