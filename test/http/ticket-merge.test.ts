import t from 'tap';
import { assertErrorShape, assertNotFound, client, makeBrand, ownerWithBrand, signup, type Signup, testApp } from '../helpers/app.js';

const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const anonymous = client(app);
type Call = Signup['live'];

const setup = () => ownerWithBrand(app);

async function ticket(call: Call, base: string, title: string) {
  const res = await call('POST', `${base}/tickets`, { title, customerEmail: `${title.toLowerCase().replace(/\W+/g, '')}@example.com` });
  if (res.status !== 201) throw new Error(`ticket create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; ticketNumber: number };
}

const BOUNDARY = 'ticketd-merge-test';
const multipartHeaders = { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` };
const multipart = (filename: string, text: string) =>
  `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: text/plain\r\n\r\n${text}\r\n--${BOUNDARY}--\r\n`;

async function comment(call: Call, base: string, ticketId: string, body: string) {
  const res = await call('POST', `${base}/tickets/${ticketId}/comments`, { body });
  if (res.status !== 201) throw new Error(`comment failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string };
}

for (const prefix of ['/v1/brands', '/v1/workspaces'] as const) {
  t.test(`${prefix}: merging moves comments, closes the sources with a note, and returns the target with a summary`, async (t) => {
    const { owner, brand, base } = await setup();
    const path = `${prefix}/${prefix === '/v1/workspaces' ? `ws_${brand.id.slice(3)}` : brand.id}`;
    const target = await ticket(owner.live, base, 'Printer broken');
    const a = await ticket(owner.live, base, 'Printer still broken');
    const b = await ticket(owner.live, base, 'Printer broken again');
    await comment(owner.live, base, target.id, 'on the target');
    const ca = await comment(owner.live, base, a.id, 'from a');
    const cb = await comment(owner.live, base, b.id, 'from b');

    const upload = await owner.live('POST', `${base}/tickets/${a.id}/attachments/upload`, multipart('log.txt', 'printer log'), multipartHeaders);
    t.equal(upload.status, 201, 'an attachment on a source');

    const res = await owner.live('POST', `${path}/tickets/${target.id}/merge`, { sourceTicketIds: [a.id, b.id] });
    t.equal(res.status, 200);
    t.equal(res.body.id, target.id, 'the SDK reads the target ticket');
    t.equal(res.body.targetTicketId, target.id, 'the dashboard reads the summary');
    t.same(res.body.mergedTicketIds, [a.id, b.id]);
    t.equal(res.body.mergedCount, 2);
    t.equal(res.body.commentCount, 4, 'own comment, two moved ones and the merge note');
    t.equal(res.body.attachmentCount, 1, 'the attachment moved too');
    const files = (await owner.live('GET', `${base}/tickets/${target.id}/attachments`)).body;
    t.same(
      files.map((f: { id: string }) => f.id),
      [upload.body.attachment.id],
    );

    const onTarget = (await owner.live('GET', `${base}/tickets/${target.id}/comments`)).body as { id: string; body: string; authorType: string; isInternal: boolean }[];
    t.same(
      onTarget.slice(0, 3).map((c) => c.body),
      ['on the target', 'from a', 'from b'],
      'moved comments keep their order',
    );
    t.ok(onTarget.map((c) => c.id).includes(ca.id) && onTarget.map((c) => c.id).includes(cb.id));
    t.match(onTarget[3], { authorType: 'SYSTEM', isInternal: true, body: `Merged #${a.ticketNumber}, #${b.ticketNumber} into this ticket.` });

    for (const source of [a, b]) {
      const got = (await owner.live('GET', `${base}/tickets/${source.id}`)).body;
      t.match(got, { status: 'closed', mergedIntoId: target.id, commentCount: 1, attachmentCount: 0 });
      const notes = (await owner.live('GET', `${base}/tickets/${source.id}/comments`)).body;
      t.match(notes, [{ authorType: 'SYSTEM', body: `Merged into ticket #${target.ticketNumber} (Printer broken).` }]);
    }

    const events = await db('auditLog').whereIn('ticketId', [target.id, a.id]).where('event', 'ticket.merged').orderBy('id').select('entityId', 'changes', 'metadata');
    t.match(
      events.find((e) => e.entityId === target.id),
      { metadata: { sourceTicketIds: [a.id, b.id] } },
    );
    t.match(
      events.find((e) => e.entityId === a.id),
      {
        changes: [
          { field: 'status', from: 'open', to: 'closed' },
          { field: 'mergedIntoId', from: null, to: target.id },
        ],
      },
    );
  });
}

t.test("the spec's spelling ticketIds works too; sending both or neither is a 400", async (t) => {
  const { owner, base } = await setup();
  const target = await ticket(owner.live, base, 'Target');
  const a = await ticket(owner.live, base, 'Source');
  assertErrorShape(t, await owner.live('POST', `${base}/tickets/${target.id}/merge`, {}), 400, 'invalid_merge_request');
  assertErrorShape(t, await owner.live('POST', `${base}/tickets/${target.id}/merge`, { sourceTicketIds: [a.id], ticketIds: [a.id] }), 400, 'invalid_merge_request');
  assertErrorShape(t, await owner.live('POST', `${base}/tickets/${target.id}/merge`, { sourceTicketIds: [] }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', `${base}/tickets/${target.id}/merge`, { sourceTicketIds: [a.id, a.id] }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', `${base}/tickets/${target.id}/merge`, { sourceTicketIds: [a.id], extra: 1 }), 400, 'validation_failed');
  const res = await owner.live('POST', `${base}/tickets/${target.id}/merge`, { ticketIds: [a.id] });
  t.equal(res.status, 200);
  t.equal(res.body.mergedCount, 1);
});

t.test('refusals: into itself, into or from a deleted ticket, already merged, other brand, other account, other mode', async (t) => {
  const { owner, base } = await setup();
  const target = await ticket(owner.live, base, 'Target');
  const source = await ticket(owner.live, base, 'Source');
  const merge = (targetId: string, ids: string[], call: Call = owner.live, b = base) => call('POST', `${b}/tickets/${targetId}/merge`, { sourceTicketIds: ids });

  assertErrorShape(t, await merge(target.id, [source.id, target.id]), 400, 'merge_into_self');

  const deleted = await ticket(owner.live, base, 'Deleted');
  await owner.live('DELETE', `${base}/tickets/${deleted.id}`);
  assertNotFound(t, await merge(deleted.id, [source.id]), 'a deleted target');
  assertNotFound(t, await merge(target.id, [deleted.id]), 'a deleted source');

  const otherBrand = await makeBrand(owner.live, 'Other brand');
  const foreign = await ticket(owner.live, `/v1/brands/${otherBrand.id}`, 'Elsewhere');
  assertNotFound(t, await merge(target.id, [foreign.id]), 'a source of another brand');

  const stranger = await signup(app);
  const strangerBrand = await makeBrand(stranger.live);
  const theirs = await ticket(stranger.live, `/v1/brands/${strangerBrand.id}`, 'Theirs');
  assertNotFound(t, await merge(target.id, [theirs.id]), 'a source of another account');
  assertNotFound(t, await merge(target.id, [source.id], stranger.live), 'another account merging into my ticket');
  assertNotFound(t, await merge(target.id, [source.id], owner.test), 'the test-mode key on live tickets');
  t.equal((await anonymous('POST', `${base}/tickets/${target.id}/merge`, { sourceTicketIds: [source.id] })).status, 401);

  t.equal((await merge(target.id, [source.id])).status, 200);
  assertErrorShape(t, await merge(target.id, [source.id]), 400, 'already_merged');
  const third = await ticket(owner.live, base, 'Third');
  assertErrorShape(t, await merge(source.id, [third.id]), 400, 'already_merged');
  const after = (await owner.live('GET', `${base}/tickets/${third.id}`)).body;
  t.match(after, { status: 'open', mergedIntoId: null, commentCount: 0 }, 'a refused merge changed nothing');
});

t.test('two opposite merges at once: one wins, the other sees it and is refused, no deadlock', async (t) => {
  const { owner, base } = await setup();
  const a = await ticket(owner.live, base, 'A');
  const b = await ticket(owner.live, base, 'B');
  const [one, two] = await Promise.all([
    owner.live('POST', `${base}/tickets/${a.id}/merge`, { sourceTicketIds: [b.id] }),
    owner.live('POST', `${base}/tickets/${b.id}/merge`, { sourceTicketIds: [a.id] }),
  ]);
  t.same([one.status, two.status].sort(), [200, 400]);
  const loser = one.status === 400 ? one : two;
  t.equal(loser.body.code, 'already_merged');
});

t.test('the merge route is in the OpenAPI document', async (t) => {
  const doc = (await anonymous('GET', '/v1/openapi.json')).body;
  t.ok(doc.paths['/v1/brands/{brandId}/tickets/{ticketId}/merge']?.post);
  t.ok(doc.paths['/v1/workspaces/{brandId}/tickets/{ticketId}/merge']?.post);
});
