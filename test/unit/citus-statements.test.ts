import t from 'tap';
import { splitAtTables } from '../../server/core/citus.js';

/**
 * On Citus, runInAccount sends a statement to the worker holding the account split at each table
 * it names, for the worker to put that table's shard in its place (decision 0092). What is
 * renamed, and what must never be: the statement's data and the names of everything else.
 */
const TABLES = new Set(['tickets', 'tags', 'ticket_tags', 'brands']);
const rejoined = (sql: string) => {
  const { parts, tables } = splitAtTables(sql, TABLES);
  return parts.reduce((out, part, i) => out + (i === 0 ? '' : `<${tables[i - 1]}>`) + part, '');
};

t.test('every bare name of a table is a place for its shard, aliases and qualifiers included', async (t) => {
  t.equal(
    rejoined('with t as (insert into tickets (id) select 1 returning *) select tickets.* from t as tickets join tags tg on tg.id = 1'),
    'with t as (insert into <tickets> (id) select 1 returning *) select <tickets>.* from t as <tickets> join <tags> tg on tg.id = 1',
  );
  t.equal(rejoined('update brands b set n = 1 from (select 1) x where brands.id = x.id'), 'update <brands> b set n = 1 from (select 1) x where <brands>.id = x.id');
  t.equal(rejoined('select 1'), 'select 1', 'a statement naming no table is one part');
  t.same(splitAtTables('select * from ticket_tags', TABLES), { parts: ['select * from ', ''], tables: ['ticket_tags'] }, 'a longer name is not its prefix');
});

t.test('a quoted name of a table, as knex writes every name, is a place for its shard too', async (t) => {
  t.equal(
    rejoined('select "tickets"."id", "tags".* from "tickets" join "tags" on "tags"."id" = "tickets"."tag_id" where "tickets"."account_id" = ?'),
    'select <"tickets">."id", <"tags">.* from <"tickets"> join <"tags"> on <"tags">."id" = <"tickets">."tag_id" where <"tickets">."account_id" = ?',
  );
  t.same(splitAtTables('select * from "ticket_tags"', TABLES), { parts: ['select * from ', ''], tables: ['"ticket_tags"'] }, 'the name as written, a regclass all the same');
  t.equal(
    rejoined('select row_to_json(v) from (select "tags".id as "tags", 1 AS"tickets" from "tags") v'),
    'select row_to_json(v) from (select <"tags">.id as "tags", 1 AS"tickets" from <"tags">) v',
    'but not an output column named after AS: the key of the row it makes',
  );
});

t.test('literals, quoted names, comments, dollar-quoted bodies, columns and functions keep their text', async (t) => {
  const untouched = [
    `select 'my tickets are broken', 'it''s tags' from x`,
    `select "Tickets", "tic""kets", x."tickets", "my tickets" from x`,
    `select 1 -- from tickets\n`,
    `select 1 /* join tags */`,
    `select $body$ update tickets $body$, $$ tags $$`,
    'select r.tags, x.tickets from x',
    'select tags(1), brands_count from x',
    'select mytickets, tickets_old from x',
  ];
  for (const sql of untouched) t.equal(rejoined(sql), sql, sql);
});

t.test('parameters stay where they are, for the worker to bind', async (t) => {
  t.equal(rejoined('select * from tickets where id = $1 and brand_id = $2'), 'select * from <tickets> where id = $1 and brand_id = $2');
});
