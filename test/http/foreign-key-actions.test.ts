import t from 'tap';
import { makeTicket, mustCreate, servicesOf, testApp } from '../helpers/app.js';
import { SIGN_IN_TEST_ENV, teamOf } from '../helpers/sign-in.js';

// What the foreign keys' ON DELETE SET NULL and ON UPDATE CASCADE did, the deleting or moving
// transaction does itself (decision 0090): each result as the key's action left it.

const { app, db } = await testApp(t, SIGN_IN_TEST_ENV);
const team = await teamOf(app, servicesOf(db));
const base = `/v1/brands/${team.first.id}`;
const call = team.owner.live;

const ticketRow = (id: string) =>
  db('tickets')
    .where({ id })
    .first('customerId', 'customerSort', 'customerText', 'companySort', 'assigneeId', 'assigneeSort', 'categoryId', 'categorySort', db.raw('search_vector::text as vector'));

t.test('DELETE /contacts/{id}: its tickets, deleted ones too, lose the customer and every name of it', async (t) => {
  await mustCreate(call, `${base}/companies`, { name: 'Zeta Corp', domain: 'zeta.example' });
  const live = await makeTicket(call, base, { title: 'Quiet printer', customerEmail: 'ursula@zeta.example', customerName: 'Ursula Unique' });
  const gone = await makeTicket(call, base, { title: 'Old one', customerEmail: 'ursula@zeta.example' });
  await call('DELETE', `${base}/tickets/${gone.id}`);
  t.match(await ticketRow(live.id), { customerSort: 'ursula unique', companySort: 'zeta corp', vector: /'ursula'/ });
  t.equal((await call('DELETE', `${base}/contacts/${live.customer.id}`)).status, 200);
  for (const id of [live.id, gone.id]) {
    const row = await ticketRow(id);
    t.match(row, { customerId: null, customerSort: '', customerText: '', companySort: '' }, `${id}: no customer`);
    t.notMatch(row.vector, /ursula|zeta/, 'nor their words in the search vector');
  }
  t.match((await ticketRow(live.id)).vector, /'printer'/, 'the title still is');
  t.equal((await call('GET', `${base}/tickets?search=ursula`)).body.data.length, 0, 'not found by the old name');
});

t.test('DELETE /categories/{id}: its tickets lose the category and its sort name', async (t) => {
  const category = await mustCreate(call, `${base}/categories`, { name: 'Billing' });
  const tk = await makeTicket(call, base, { title: 'Invoice', categoryId: category.id });
  t.match(await ticketRow(tk.id), { categoryId: category.id, categorySort: 'billing' });
  t.equal((await call('DELETE', `${base}/categories/${category.id}`)).status < 300, true);
  t.match(await ticketRow(tk.id), { categoryId: null, categorySort: '' });
  t.equal((await call('GET', `${base}/tickets/${tk.id}`)).body.category, null, 'the ticket shows none');
});

t.test('DELETE /auth/members/{id}: their tickets in every brand lose the assignee and its sort name', async (t) => {
  const other = `/v1/brands/${team.second.id}`;
  const [one, two] = [await makeTicket(call, base, { title: 'First brand' }), await makeTicket(call, other, { title: 'Second brand' })];
  await call('PATCH', `${base}/tickets/${one.id}`, { assigneeId: team.admin.id });
  await call('PATCH', `${other}/tickets/${two.id}`, { assigneeId: team.admin.id });
  t.match(await ticketRow(one.id), { assigneeId: team.admin.id, assigneeSort: 'ada admin' });
  t.equal((await team.asOwner('DELETE', `/v1/auth/members/${team.admin.id}`)).status < 300, true);
  for (const id of [one.id, two.id]) t.match(await ticketRow(id), { assigneeId: null, assigneeSort: '' }, `${id}: unassigned`);
});

t.test('DELETE /companies/{id}: its contacts stay, without a company; their tickets lose its name', async (t) => {
  const company = await mustCreate(call, `${base}/companies`, { name: 'Omega Ltd', domain: 'omega.example' });
  const tk = await makeTicket(call, base, { title: 'Omega asks', customerEmail: 'olga@omega.example' });
  t.equal((await call('GET', `${base}/contacts/${tk.customer.id}`)).body.companyId, company.id);
  t.equal((await call('DELETE', `${base}/companies/${company.id}`)).status, 200);
  const contact = await db('contacts').where({ id: tk.customer.id }).first('companyId');
  t.equal(contact.companyId, null, 'the contact is kept, unlinked');
  t.match(await ticketRow(tk.id), { customerId: tk.customer.id, companySort: '' });
});

t.test('POST /tickets/{id}/merge: the mentions of the moved comments move with them', async (t) => {
  const [target, source] = [await makeTicket(call, base, { title: 'Target' }), await makeTicket(call, base, { title: 'Source' })];
  const made = await team.asOwner('POST', `${base}/tickets/${source.id}/comments`, { body: `@[Mo](${team.member.id}) look` });
  t.equal(made.status, 201);
  t.equal((await call('POST', `${base}/tickets/${target.id}/merge`, { sourceTicketIds: [source.id] })).status, 200);
  const mention = await db('mentions').where({ commentId: made.body.id }).first('ticketId');
  t.equal(mention.ticketId, target.id, 'the mention names the ticket its comment is on now');
  const unread = (await team.asMember('GET', '/v1/auth/mentions/unread')).body;
  t.match(unread, [{ ticketId: target.id, ticketTitle: 'Target' }]);
});

t.test('the six keys have no action Citus refuses', async (t) => {
  const { rows } = await db.raw(`select conname, confupdtype, confdeltype from pg_constraint where conname = any(?) order by conname`, [
    ['contacts_company_fk', 'tickets_assignee_fk', 'tickets_category_fk', 'tickets_customer_fk', 'member_profiles_avatar_fk', 'mentions_comment_fk'],
  ]);
  t.equal(rows.length, 6);
  for (const r of rows) {
    t.equal(r.confupdtype, 'a', `${r.conname}: no action on update`);
    t.not(r.confdeltype, 'n', `${r.conname}: no SET NULL on delete`);
  }
});
