import t from 'tap';
import { runCli, startServer } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';

// When the grouped create statement fails as a whole (a deadlock with another process, say), its
// creates go step by step: the caller still gets a 201, the numbers keep no gap, and the real
// server's log says so. A trigger injects the failure into the first attempt to insert the ticket
// titled 'fail the batch' (the grouped statement; the step-by-step create is the second): a
// sequence counts the attempts, since a sequence, unlike a row, keeps counting through a rollback.
const { url, db } = await freshDatabase(t);
await db.raw(`
  create sequence injected_attempts;
  create function fail_first_attempt() returns trigger language plpgsql as $$
  begin
    if new.title = 'fail the batch' and nextval('injected_attempts') = 1 then
      raise exception 'injected failure of the grouped create';
    end if;
    return new;
  end $$;
  create trigger fail_first_attempt before insert on tickets for each row execute function fail_first_attempt();`);

t.test('a failed batch: the create still succeeds step by step, numbers keep no gap, and the server logs a warning', async (t) => {
  const created = await runCli(['accounts', 'create', '--email', 'ops@example.com', '--brand', 'Ops', '--json'], { DATABASE_URL: url });
  t.equal(created.code, 0, 'accounts create', { stderr: created.stderr });
  const { apiKeys, brand } = created.json();
  const server = startServer({ DATABASE_URL: url, TICKETD_LOG_LEVEL: 'warn' });
  t.teardown(async () => {
    server.child.kill('SIGTERM');
    await server.exited;
  });
  const info = await server.ready;
  const warnings = () =>
    server
      .stderr()
      .split('\n')
      .filter((l) => l.includes('a batch of ticket creates failed'));
  async function createTicket(title: string) {
    const res = await fetch(`${info.url}/v1/brands/${brand.id}/tickets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKeys.live.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ title, customerEmail: 'someone@example.com' }),
    });
    return { status: res.status, body: (await res.json()) as { id: string; title: string; ticketNumber: number } };
  }

  const before = await createTicket('an ordinary ticket');
  t.equal(before.status, 201);
  t.same(warnings(), [], 'an ordinary create logs nothing');

  const failed = await createTicket('fail the batch');
  t.equal(failed.status, 201, 'the caller gets the ticket');
  t.equal(failed.body.title, 'fail the batch');
  t.equal(failed.body.ticketNumber, before.body.ticketNumber + 1, 'the failed batch took no number');
  const after = await createTicket('another ordinary ticket');
  t.equal(after.body.ticketNumber, failed.body.ticketNumber + 1);
  t.equal(Number((await db('tickets').where({ title: 'fail the batch' }).count({ n: '*' }))[0]!.n), 1, 'one ticket, not two');

  const logged = warnings().map((l) => JSON.parse(l));
  t.equal(logged.length, 1, 'one warning for the one failed batch');
  t.equal(logged[0].level, 40, 'at warn level');
  t.equal(logged[0].creates, 1);
  t.match(logged[0].err.message, /injected failure of the grouped create/, 'with the database error');
  t.equal(logged[0].accountId, brand.accountId, "in the request's context");
});
