/**
 * Keeps every join and correlation between tenant tables routable to one shard (decision 0086):
 * the source of server/ is read for SQL that joins a tenant table (raw `join <table> <alias> on …`,
 * knex's `.join('<table>', …)`) or correlates a subquery over one to an outer row, and each such
 * condition must carry the tenant key: `${sameTenant(…)}` / `${sameAccount(…)}` / `${tenantIs(…)}` / `${accountIs(…)}` (or, in core/, the
 * typed-out `a.account_id = b.account_id`), knex's `accountId` pair, or `using (account_id, …)`.
 * A pragmatic reading of the text, not a SQL parser: the exceptions are listed with why.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { packageRoot } from '../../server/core/paths.js';
import { GLOBAL_TABLES } from '../../server/core/tenancy.js';
import { freshDatabase } from '../helpers/db.js';

const read = (file: string) => readFileSync(path.join(packageRoot, file), 'utf8');

function sources(dir: string): string[] {
  return (readdirSync(path.join(packageRoot, dir), { recursive: true }) as string[])
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(dir, f).split(path.sep).join('/'))
    .sort();
}

/** The tables the migrations make, less the global ones: snake_case and knex's camelCase names. */
function tenantTables(): Set<string> {
  const names = new Set<string>();
  for (const file of sources('migrations')) for (const m of read(file).matchAll(/createTable\('([a-z_]+)'/g)) names.add(m[1]!);
  for (const name of Object.keys(GLOBAL_TABLES)) names.delete(name);
  return new Set([...names, ...[...names].map((n) => n.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()))]);
}

/**
 * Joins and correlations without the tenant key, by `file: table alias`, with why. Each must still
 * scope its table to the request's tenant by a bound constant (tenantScope/accountScope, the first
 * term of its condition): the other side holds no account_id to equal, and the constant alone
 * names the one shard.
 */
const ALLOWED: Readonly<Record<string, string>> = {
  'server/core/outbox/service.ts: webhooks w': 'joined to the events the statement was given, a record set of the request',
  'server/domains/billing/service.ts: subscriptions s': "joined to the account's own row of accounts, a global table",
  'server/domains/tickets/dashboard.ts: tickets tickets':
    'the page picked by the CTE m (the tenant scoped tickets, only brand_id and id: the LATERAL parts read those from the index) read again whole',
  'server/flows/ticket-create-statement.ts: tags tg': "correlated to the statement's items, a record set of the request",
  'server/flows/ticket-create-statement.ts: brands b': "correlated to the statement's items, a record set of the request",
  'server/flows/ticket-create-statement.ts: statuses s': "correlated to the statement's items, a record set of the request",
  'server/flows/ticket-create-statement.ts: categories ca': "correlated to the statement's items, a record set of the request",
  'server/flows/ticket-create-statement.ts: members m': "correlated to the statement's items, a record set of the request",
  'server/flows/ticket-create-statement.ts: contacts c': "correlated to the statement's items, a record set of the request",
  'server/flows/ticket-create-statement.ts: companies co': "correlated to the statement's items, a record set of the request",
};

/**
 * Statements that read every account by design, by `file: table alias`, with why: there is no
 * tenant to scope them to, and they lock nothing.
 */
const ACROSS_ACCOUNTS: Readonly<Record<string, string>> = {
  'server/core/outbox/service.ts: outbox c': "the dispatcher's look-out steps from one account with due messages to the next (not run on Citus: decision 0110)",
};

/** A condition that scopes its table by a bound constant first: `?`, `:xScope` or a scope fragment's SQL. */
const CONSTANT_SCOPE = /^\s*(\?|:\w+Scope\b|\$\{scope\.sql\})/;

/** The condition from `from` on: up to the first keyword, comma or closing bracket at its own depth. */
function conditionAt(text: string, from: number, knexCall = false): string {
  let depth = 0;
  let i = from;
  for (; i < text.length; i++) {
    const c = text[i]!;
    if (c === '$' && text[i + 1] === '{') {
      // An interpolation: skip it whole (it may hold quotes and brackets).
      let braces = 0;
      for (; i < text.length; i++) {
        if (text[i] === '{') braces++;
        else if (text[i] === '}' && --braces === 0) break;
      }
      continue;
    }
    if (c === '(') depth++;
    else if (c === ')' && --depth < 0) break;
    else if (knexCall) continue;
    else if (depth === 0 && (c === '`' || c === "'" || c === ';')) break;
    else if (depth === 0 && /\s/.test(c)) {
      const rest = text.slice(i + 1, i + 40);
      if (/^(join|left|right|inner|full|cross|where|group\s+by|order\s+by|limit|having|returning|union|window|for\s+(update|no\s+key|share)|on\s+conflict)\b/i.test(rest)) break;
    }
  }
  return text.slice(from, i);
}

/** Whether a condition ties `alias` to another relation by the tenant key. */
function carriesKey(condition: string, alias: string, inCore: boolean): boolean {
  if (/\$\{\s*(same(Tenant|Account)|tenantIs|accountIs)\(/.test(condition)) return true;
  if (/\busing\s*\(\s*account_id\b/i.test(condition)) return true;
  if (/\baccountId'/.test(condition)) return true;
  const a = alias.replace(/[^\w]/g, '');
  // In core/ and in the database's functions the key may be typed out, or be the function's parameter.
  return (
    inCore && new RegExp(`(^|[^.\\w])(${a}\\.)?account_id\\s*=\\s*(\\w+\\.account_id|p_\\w+|\\$\\d+)\\b|\\b\\w+\\.account_id\\s*=\\s*${a}\\.account_id\\b`, 'i').test(condition)
  );
}

/** Every join or correlated subquery over a tenant table in `text` whose condition lacks the tenant key. */
export function keylessJoins(file: string, text: string, tables: ReadonlySet<string>): string[] {
  const found: string[] = [];
  const inCore = file.startsWith('server/core/') || file.startsWith('database:');
  const lineOf = (at: number) => text.slice(0, at).split('\n').length;
  const report = (at: number, table: string, alias: string, condition: string) => {
    const key = `${file}: ${table} ${alias}`;
    if (key in ACROSS_ACCOUNTS) return;
    if (!(key in ALLOWED) || !CONSTANT_SCOPE.test(condition)) found.push(`${file}:${lineOf(at)} ${table} ${alias} on ${condition.replace(/\s+/g, ' ').trim().slice(0, 120)}`);
  };
  // Raw SQL: join <table> [as] <alias> on|using …
  for (const m of text.matchAll(/\bjoin\s+(?:lateral\s+)?([a-z_]+)(?:\s+(?:as\s+)?(?!on\b|using\b)([a-z_]\w*|\$\{\w+\}))?\s+(on|using)\b/gi)) {
    const table = m[1]!;
    if (!tables.has(table)) continue;
    const alias = m[2] ?? table;
    const condition = (m[3]!.toLowerCase() === 'using' ? 'using ' : '') + conditionAt(text, m.index + m[0].length);
    if (!carriesKey(condition, alias, inCore)) report(m.index, table, alias, condition);
  }
  // knex: .join('<table> [as <alias>]', …) and its kin; the condition is the call's arguments.
  for (const m of text.matchAll(/\.(?:join|leftJoin|innerJoin|rightJoin|leftOuterJoin|rightOuterJoin|fullOuterJoin)\(\s*'(\w+)(?:\s+as\s+(\w+))?'/g)) {
    const table = m[1]!;
    if (!tables.has(table)) continue;
    const condition = conditionAt(text, m.index + m[0].length, true);
    if (!carriesKey(condition, m[2] ?? table, inCore)) report(m.index, table, m[2] ?? table, condition);
  }
  // knex correlations: whereExists(…whereColumn('a.x', 'b.y')…) and its kin.
  for (const m of text.matchAll(/\.(?:whereExists|whereNotExists|orWhereExists|whereIn|whereNotIn)\(/g)) {
    const condition = conditionAt(text, m.index + m[0].length, true);
    if (/\.whereColumn\(/.test(condition) && !/\.whereColumn\(\s*'\w+\.accountId'/.test(condition)) report(m.index, '(subquery)', '', condition);
  }
  // Correlated subqueries and UPDATE … FROM: `from <table> <alias> where …` naming another alias's column.
  for (const m of text.matchAll(/\bfrom\s+([a-z_]+)(?:\s+(?:as\s+)?(?!where\b)([a-z_]\w*))?\s+where\b/gi)) {
    const table = m[1]!;
    if (!tables.has(table)) continue;
    const alias = m[2] ?? table;
    const condition = conditionAt(text, m.index + m[0].length);
    const outer = [...condition.replace(/\$\{[^}]*\}/g, '').matchAll(/\b([a-z_]\w*)\.[a-z_]\w*\b/gi)].map((x) => x[1]!).filter((x) => x !== alias);
    if (outer.length && !carriesKey(condition, alias, inCore)) report(m.index, table, alias, condition);
  }
  return found;
}

/**
 * Upserts whose conflict predicate calls a function that is not IMMUTABLE (the clock, random()):
 * on a distributed table such an INSERT is refused. Raw `on conflict … do update … where …` and
 * knex's `.onConflict(…).merge(…).whereRaw(…)`.
 */
function stableInConflict(text: string): string[] {
  const clock =
    /\b(now|clock_timestamp|statement_timestamp|transaction_timestamp|timeofday|random|gen_random_uuid|ticketd_new_id)\s*\(|\b(current_timestamp|current_date|localtimestamp)\b/i;
  const found: string[] = [];
  for (const m of text.matchAll(/\bon\s+conflict\b[\s\S]*?(?=\breturning\b|`|;|$)/gi)) {
    const where = /\bdo\s+update\b[\s\S]*?\bwhere\b([\s\S]*)/i.exec(m[0]);
    if (where && clock.test(where[1]!)) found.push(m[0].replace(/\s+/g, ' ').slice(0, 160));
  }
  for (const m of text.matchAll(/\.onConflict\([^)]*\)\s*\.merge\([^)]*\)\s*\.where\w*\(([^;]*?)\)\s*\./g)) {
    if (clock.test(m[1]!)) found.push(m[0].replace(/\s+/g, ' ').slice(0, 160));
  }
  return found;
}

/** Conflict targets without account_id: the global tables' keys (GLOBAL_TABLES), by the target's text. */
const GLOBAL_CONFLICT_TARGETS: Readonly<Record<string, string>> = {
  '(name)': 'server_secrets',
  '(bucket, window_start)': 'rate_limit_counters',
  "['provider', 'messageId']": 'identity_notifications',
  "['provider', 'eventId']": 'billing_events',
  "'code'": 'coupons',
  "tx.db.raw('(provider, provider_ref) where provider_ref is not null')": 'signup_checkouts',
};

/** Upsert targets that leave out account_id (a target names the unique index a shard checks alone). */
function keylessConflictTargets(text: string): string[] {
  const targets = [...[...text.matchAll(/\bon\s+conflict\s*(\([^)]*\))/gi)].map((m) => m[1]!), ...[...text.matchAll(/\.onConflict\(((?:[^()]|\([^()]*\))+)\)/g)].map((m) => m[1]!)];
  return targets.filter((x) => !/account_?id|\$\{KEY\}/i.test(x) && !(x.replace(/\s+/g, ' ') in GLOBAL_CONFLICT_TARGETS));
}

const tables = tenantTables();

t.test('the check sees what it checks', async (t) => {
  t.ok(tables.has('tickets') && tables.has('contacts') && tables.has('apiKeys'), 'the tenant tables come from the migrations');
  t.notOk(tables.has('accounts'), 'the global ones are left out');
  const bad = [
    'select * from contacts c left join companies co on co.id = c.company_id',
    "q.leftJoin('companies', 'companies.id', 'contacts.companyId')",
    'select (select c.email from contacts c where c.id = tickets.customer_id) from tickets',
    "select 1 from audit_log a join api_keys k on k.id = a.performer_id and a.performer_type = 'api' where a.x = 1",
    "Avatar.ofAccount(ctx).whereExists(MemberProfile.ofAccount(ctx).whereColumn('memberProfiles.avatarId', 'avatars.id'))",
    'update tickets t set x = 1 from contacts c where c.id = t.customer_id',
    'q.joinRaw(`join ticket_tags ${alias} on ${scope.sql} and ${alias}.ticket_id = tickets.id`)',
  ];
  for (const sql of bad) t.equal(keylessJoins('server/domains/x.ts', sql, tables).length, 1, sql);
  const good = [
    "select * from contacts c left join companies co on ${sameTenant('co', 'c')} and co.id = c.company_id",
    "q.leftJoin('companies', (j) => j.on('companies.accountId', 'contacts.accountId').andOn('companies.id', 'contacts.companyId'))",
    "select (select c.email from contacts c where ${sameTenant('c', 'tickets')} and c.id = tickets.customer_id) from tickets",
    'select 1 from audit_log a join api_keys k on k.account_id = a.account_id and k.id = a.performer_id',
    "Avatar.ofAccount(ctx).whereExists(MemberProfile.ofAccount(ctx).whereColumn('memberProfiles.accountId', 'avatars.accountId').whereColumn('memberProfiles.avatarId', 'avatars.id'))",
    "update tickets t set x = 1 from contacts c where ${sameTenant('c', 't')} and c.id = t.customer_id",
  ];
  for (const sql of good) t.same(keylessJoins('server/core/x.ts', sql, tables), [], sql);
  t.equal(keylessJoins('server/domains/x.ts', good[3]!, tables).length, 1, 'outside core/, the key is typed out only through the helpers');
  t.equal(keylessJoins('database: function f', 'SELECT 1 FROM tickets t JOIN contacts c ON c.id = t.customer_id WHERE t.account_id = p_account', tables).length, 1);
  t.same(keylessJoins('database: function f', 'UPDATE brands SET x = 1 WHERE account_id = d.account_id AND id = d.brand_id', tables), []);
  t.same(stableInConflict('insert into x select 1 on conflict (a) do update set b = excluded.b where x.expires_at <= now() returning a').length, 1);
  t.same(stableInConflict('insert into x select 1 on conflict (a) do update set b = excluded.b where x.expires_at <= excluded.created_at returning a'), []);
  t.equal(
    keylessJoins('server/flows/ticket-create-statement.ts', 'select 1 from items i where exists (select 1 from tags tg where tg.id = i.tag_id)', tables).length,
    1,
    'an exception listed still needs its constant scope',
  );
});

t.test('every join and correlation between tenant tables in server/ carries the tenant key', async (t) => {
  const found = sources('server').flatMap((file) => keylessJoins(file, read(file), tables));
  t.same(found, []);
});

t.test('no upsert in server/ has the clock or another non-IMMUTABLE function in its conflict predicate', async (t) => {
  t.same(
    sources('server').flatMap((file) => stableInConflict(read(file)).map((x) => `${file}: ${x}`)),
    [],
  );
});

t.test("every upsert's conflict target in server/ names account_id, but the global tables'", async (t) => {
  t.same(keylessConflictTargets("insert into x values (1) on conflict (brand_id, email) do nothing; q.onConflict(['brandId', 'email'])").length, 2);
  t.same(
    sources('server').flatMap((file) => keylessConflictTargets(read(file)).map((x) => `${file}: ${x}`)),
    [],
  );
});

t.test("the database's functions and views join tenant tables by the tenant key too", async (t) => {
  const { db } = await freshDatabase(t);
  const { rows } = (await db.raw(`
    select 'function ' || p.proname as name, pg_get_functiondef(p.oid) as text from pg_proc p
      join pg_namespace n on n.oid = p.pronamespace join pg_language l on l.oid = p.prolang
      where n.nspname = 'public' and l.lanname in ('sql', 'plpgsql')
    union all
    select 'view ' || viewname, definition from pg_views where schemaname = 'public'`)) as { rows: { name: string; text: string }[] };
  t.ok(
    rows.some((r) => r.name === 'function ticketd_count_tickets'),
    'the functions are read',
  );
  const found = rows.flatMap((r) => keylessJoins(`database: ${r.name}`, r.text, tables));
  t.same(found, []);
});
