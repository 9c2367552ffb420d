/**
 * Seeds one brand (or several, tickets dealt round robin) with N tickets server-side (INSERT … SELECT generate_series), fast: secondary
 * indexes of tickets are dropped during the load and rebuilt after it, the load runs on two
 * connections (two cores), and the tickets trigger fills the denormalized sort and search columns
 * exactly as it does for tickets made through the API.
 *
 * Variety: statuses, priorities, 20 assignees, 50,000 customers (70% with one of 2,000 companies;
 * accented names), 15 categories, 0-3 of 50 tags, 1% spam, 1% deleted, two years of creation dates,
 * titles and bodies drawn from a Zipf-like vocabulary (see vocabulary.ts). With several brands, each
 * gets its own share of the companies, contacts (at least 500 each), and its own categories and tags;
 * ticket i goes to brand i mod B, so every brand spans the same two years.
 */
import pg from 'pg';
import { FIRST_NAMES, LAST_NAMES, vocabulary } from './vocabulary.js';

export interface Seeded {
  seconds: number;
  memberIds: string[];
  tagIds: string[];
  categoryIds: string[];
  contactEmails: string[];
  liveTickets: number;
  words: string[];
}

/** Seeded ids: the prefix and the row number in 26 digits (valid id characters; they sort before any id made now). */
const ID = (prefix: string, n: string) => `'${prefix}_' || lpad((${n})::text, 26, '0')`;

const TAG_NAMES = [
  'billing',
  'bug',
  'vip',
  'feature-request',
  'refund',
  'shipping',
  'login',
  'mobile',
  'urgent',
  'enterprise',
  'churn-risk',
  'api',
  'integration',
  'onboarding',
  'security',
  'gdpr',
  'invoice',
  'outage',
  'performance',
  'ui',
  'android',
  'ios',
  'web',
  'email',
  'sms',
  'export',
  'import',
  'sso',
  'password',
  'payment',
  'upgrade',
  'downgrade',
  'trial',
  'partner',
  'reseller',
  'education',
  'nonprofit',
  'beta',
  'legacy',
  'migration',
  'webhook',
  'report',
  'dashboard',
  'search',
  'notification',
  'calendar',
  'sync',
  'backup',
  'audit',
  'compliance',
];
const CATEGORY_NAMES = [
  'Billing',
  'Technical',
  'Account',
  'Shipping',
  'Returns',
  'Sales',
  'Feedback',
  'Bug report',
  'Feature request',
  'Security',
  'Onboarding',
  'Integrations',
  'Mobile',
  'Partnerships',
  'Other',
];

async function connect(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, application_name: 'ticketd-bench-seed' });
  await c.connect();
  await c.query("SET maintenance_work_mem = '512MB'");
  return c;
}

export async function seed(url: string, opts: { accountId: string; brandId: string; brandIds?: string[]; tickets: number; log: (s: string) => void }): Promise<Seeded> {
  const started = Date.now();
  const { accountId, brandId, tickets: n, log } = opts;
  const brands = opts.brandIds ?? [brandId];
  const B = brands.length;
  const companiesPer = Math.max(100, Math.ceil(2000 / B));
  const contactsPer = Math.max(500, Math.ceil(50_000 / B));
  const words = vocabulary(20_000);
  const [a, b] = [await connect(url), await connect(url)];
  for (const c of [a, b]) await c.query("SET session_replication_role = 'replica'");
  try {
    const scope = [accountId, true, brands];

    const members = await a.query<{ id: string }>(
      `
      INSERT INTO members (id, account_id, email, name, role)
      SELECT ${ID('mem', 'i')}, $1, 'agent' || i || '@support.example', ($2::text[])[1 + i % 30] || ' ' || ($3::text[])[1 + (i * 7) % 26], 'member'
      FROM generate_series(1, 20) AS i RETURNING id`,
      [accountId, FIRST_NAMES, LAST_NAMES],
    );
    const memberIds = members.rows.map((r) => r.id);
    await a.query(
      `
      INSERT INTO companies (id, account_id, livemode, brand_id, name, name_key, domain)
      SELECT ${ID('co', 'k * 1000000 + i')}, $1, $2, b.id, initcap(($4::text[])[100 + i]) || ' ' || (ARRAY['Inc', 'GmbH', 'SARL', 'Ltd', 'AB'])[1 + i % 5],
             lower(($4::text[])[100 + i]) || ' ' || lower((ARRAY['Inc', 'GmbH', 'SARL', 'Ltd', 'AB'])[1 + i % 5]), 'company' || i || '.example'
      FROM unnest($3::text[]) WITH ORDINALITY AS b (id, k), generate_series(1, $5::int) AS i`,
      [...scope, words, companiesPer],
    );
    const contacts = await a.query<{ email: string }>(
      `
      INSERT INTO contacts (id, account_id, livemode, brand_id, email, name, name_key, company_id)
      SELECT ${ID('cus', 'k * 1000000 + i')}, $1, $2, b.id,
             lower(unaccent(replace(f || '.' || l, ' ', ''))) || i || '@' || CASE WHEN i % 10 < 7 THEN 'company' || (1 + i % $7::int) || '.example' ELSE 'mail' || (i % 50) || '.example' END,
             f || ' ' || l, lower(unaccent(f || ' ' || l)),
             CASE WHEN i % 10 < 7 THEN ${ID('co', 'k * 1000000 + 1 + i % $7::int')} END
      FROM unnest($3::text[]) WITH ORDINALITY AS b (id, k), generate_series(1, $6::int) AS i,
           LATERAL (SELECT ($4::text[])[1 + i % 30] AS f, ($5::text[])[1 + (i / 30) % 26] AS l) AS names
      RETURNING email`,
      [...scope, FIRST_NAMES, LAST_NAMES, contactsPer, companiesPer],
    );
    const categories = await a.query<{ id: string }>(
      `
      INSERT INTO categories (id, account_id, livemode, brand_id, name, color, sort_order)
      SELECT ${ID('cat', 'k * 1000000 + i')}, $1, $2, b.id, ($4::text[])[i], '#336699', i
      FROM unnest($3::text[]) WITH ORDINALITY AS b (id, k), generate_series(1, 15) AS i ORDER BY k, i RETURNING id`,
      [...scope, CATEGORY_NAMES],
    );
    const tags = await a.query<{ id: string }>(
      `
      INSERT INTO tags (id, account_id, livemode, brand_id, name, color)
      SELECT ${ID('tag', 'k * 1000000 + i')}, $1, $2, b.id, ($4::text[])[i], '#aa3366'
      FROM unnest($3::text[]) WITH ORDINALITY AS b (id, k), generate_series(1, 50) AS i ORDER BY k, i RETURNING id`,
      [...scope, TAG_NAMES],
    );
    log(`seed: 20 members; per brand (${B}): ${companiesPer} companies, ${contactsPer} contacts, 15 categories, 50 tags (${((Date.now() - started) / 1000).toFixed(1)} s)`);

    // Secondary indexes go during the load (constraint indexes stay: the foreign keys need them).
    const indexes = await a.query<{ name: string; def: string }>(`
      SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def FROM pg_index i
      WHERE i.indrelid IN ('tickets'::regclass, 'ticket_tags'::regclass)
        AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)`);
    for (const ix of indexes.rows) await a.query(`DROP INDEX ${ix.name}`);

    // Text: 20,000 titles and 20,000 body halves drawn from the vocabulary; a ticket takes a title and two halves.
    await a.query('ANALYZE contacts, companies, members, categories, tags');
    await a.query(
      `CREATE UNLOGGED TABLE bench_text AS
      SELECT k, initcap((SELECT string_agg(($1::text[])[floor(exp(random() * ln($2::float8)))::int], ' ') FROM generate_series(1, 4 + k % 6) WHERE k >= 0)) AS title,
                (SELECT string_agg(($1::text[])[floor(exp(random() * ln($2::float8)))::int], ' ') FROM generate_series(1, 8 + (k * 7) % 30) WHERE k >= 0) AS body
      FROM generate_series(0, 19999) AS k`,
      [words, words.length],
    );
    await a.query('ALTER TABLE bench_text ADD PRIMARY KEY (k)');

    // The foreign-key checks are off for the load (session_replication_role), and this statement
    // fills the derived columns as ticket create would (resolved_at: done tickets
    // were resolved within three days of their creation): the title and body hold
    // only letters and spaces, for which ticketd_search_text() is unaccent(); checked below.
    const loadStarted = Date.now();
    const insert = (c: pg.Client, lo: number, hi: number) =>
      c.query(
        `
      INSERT INTO tickets (id, account_id, livemode, brand_id, ticket_number, title, body, status, priority, assignee_id,
        customer_id, category_id, source, is_spam, comment_count, attachment_count, created_at, updated_at, deleted_at, resolved_at, due_at, overdue_at,
        customer_text, customer_sort, company_sort, assignee_sort, category_sort, search_vector)
      SELECT ${ID('tkt', 's.i')}, $1, $2, ($3::text[])[1 + s.i % $9::int], 1 + s.i / $9::int, p1.title, p2.body || ' ' || p3.body,
        CASE WHEN r1 < 0.30 THEN 'open' WHEN r1 < 0.45 THEN 'pending' WHEN r1 < 0.75 THEN 'resolved' ELSE 'closed' END,
        CASE WHEN r2 < 0.20 THEN NULL WHEN r2 < 0.40 THEN 'low' WHEN r2 < 0.70 THEN 'normal' WHEN r2 < 0.80 THEN 'medium' WHEN r2 < 0.95 THEN 'high' ELSE 'urgent' END,
        m.id, cu.id, ca.id,
        (ARRAY['email', 'email', 'api', 'web', 'slack', 'whatsapp'])[1 + s.i % 6],
        random() < 0.01, floor(random() * 8)::int, CASE WHEN random() < 0.1 THEN 1 + floor(random() * 3)::int ELSE 0 END,
        to_timestamp(ms / 1000.0), to_timestamp(ms / 1000.0) + random() * interval '10 days',
        CASE WHEN random() < 0.01 THEN now() END,
        CASE WHEN r1 >= 0.45 THEN least(now(), to_timestamp(ms / 1000.0) + random() * interval '3 days') END,
        due.at, CASE WHEN r1 < 0.45 AND due.at <= now() THEN due.at END,
        coalesce(cu.text, ''), coalesce(cu.sort, ''), coalesce(cu.company, ''), coalesce(m.sort, ''), coalesce(ca.sort, ''),
        setweight(to_tsvector('pg_catalog.simple', unaccent(p1.title)), 'A')
          || setweight(to_tsvector('pg_catalog.simple', ticketd_search_text(coalesce(cu.text, ''))), 'B')
          || setweight(to_tsvector('pg_catalog.simple', unaccent(p2.body || ' ' || p3.body)), 'C')
      FROM (SELECT i, $4::bigint + (i::bigint * $5::bigint / $6::bigint) AS ms, random() AS r1, random() AS r2,
                   CASE WHEN random() < 0.85 THEN 1 + floor(random() * 20)::int END AS assignee,
                   CASE WHEN random() < 0.95 THEN (1 + i % $9::int) * 1000000 + 1 + floor(random() ^ 2 * $10::int)::int END AS customer,
                   CASE WHEN random() < 0.80 THEN (1 + i % $9::int) * 1000000 + 1 + floor(random() * 15)::int END AS category,
                   floor(random() * 20000)::int AS t1, floor(random() * 20000)::int AS t2, floor(random() * 20000)::int AS t3
            FROM generate_series($7::int, $8::int) AS i) AS s
      -- A 24/7 service level of 4/24/72/168 hours (urgent/high/normal and none/low); those past it unresolved were announced.
      CROSS JOIN LATERAL (SELECT to_timestamp(ms / 1000.0) + interval '1 hour' * CASE WHEN r2 < 0.20 THEN 72 WHEN r2 < 0.40 THEN 168 WHEN r2 < 0.80 THEN 72 WHEN r2 < 0.95 THEN 24 ELSE 4 END AS at) AS due
      JOIN bench_text p1 ON p1.k = s.t1
      JOIN bench_text p2 ON p2.k = s.t2
      JOIN bench_text p3 ON p3.k = s.t3
      LEFT JOIN (SELECT c.id, btrim(coalesce(c.name, '') || ' ' || c.email) AS text, lower(coalesce(nullif(c.name, ''), c.email)) AS sort, lower(co.name) AS company
                 FROM contacts c LEFT JOIN companies co ON co.account_id = c.account_id AND co.livemode = c.livemode AND co.brand_id = c.brand_id AND co.id = c.company_id
                 WHERE c.account_id = $1 AND c.livemode = $2 AND c.brand_id = ANY($3::text[])) AS cu ON cu.id = ${ID('cus', 's.customer')}
      LEFT JOIN (SELECT id, lower(coalesce(nullif(name, ''), email)) AS sort FROM members WHERE account_id = $1) AS m ON m.id = ${ID('mem', 's.assignee')}
      LEFT JOIN (SELECT id, lower(name) AS sort FROM categories WHERE account_id = $1 AND livemode = $2 AND brand_id = ANY($3::text[])) AS ca ON ca.id = ${ID('cat', 's.category')}`,
        [...scope, Date.now() - 2 * 365 * 86_400_000, 2 * 365 * 86_400_000 - 3_600_000, n, lo, hi, B, contactsPer],
      );
    const CHUNK = 50_000;
    const chunks: [number, number][] = [];
    for (let lo = 1; lo <= n; lo += CHUNK) chunks.push([lo, Math.min(n, lo + CHUNK - 1)]);
    let done = 0;
    const worker = async (c: pg.Client) => {
      for (let next = chunks.shift(); next; next = chunks.shift()) {
        await insert(c, next[0], next[1]);
        done += next[1] - next[0] + 1;
        if (done % 200_000 < CHUNK) log(`seed: ${done.toLocaleString('en')} tickets (${((Date.now() - loadStarted) / 1000).toFixed(0)} s)`);
      }
    };
    await Promise.all([worker(a), worker(b)]);
    await a.query('UPDATE brands SET next_ticket_number = $1 WHERE account_id = $2 AND livemode = true AND id = ANY($3::text[])', [Math.floor(n / B) + 2, accountId, brands]);
    await a.query(
      `
      INSERT INTO ticket_tags (account_id, livemode, brand_id, ticket_id, tag_id, status, priority)
      SELECT t.account_id, t.livemode, t.brand_id, t.id, tg.id, t.status, t.priority
      FROM tickets t CROSS JOIN generate_series(1, 3) AS k
      CROSS JOIN LATERAL (SELECT floor(exp(random() * ln(51)))::int + k * 0 AS n) AS pick
      JOIN tags tg ON tg.account_id = t.account_id AND tg.livemode = t.livemode AND tg.brand_id = t.brand_id AND tg.name = ($4::text[])[pick.n]
      WHERE t.account_id = $1 AND t.livemode = $2 AND t.brand_id = ANY($3::text[]) AND random() < 0.5
      ON CONFLICT DO NOTHING`,
      [...scope, TAG_NAMES],
    );
    // A sample checked against what ticket create stores (not on Citus, which cannot correlate to a sample).
    const onCitus = (await a.query(`SELECT 1 FROM pg_extension WHERE extname = 'citus'`)).rows.length > 0;
    const wrong = onCitus
      ? { rows: [{ n: '0' }] }
      : await a.query<{ n: string }>(`SELECT count(*) AS n FROM (SELECT * FROM tickets TABLESAMPLE SYSTEM (1) LIMIT 2000) t
      WHERE search_vector <> ticketd_ticket_vector(title, customer_text, body)
         OR customer_sort <> coalesce((SELECT lower(coalesce(nullif(c.name, ''), c.email)) FROM contacts c WHERE c.account_id = t.account_id AND c.id = t.customer_id), '')`);
    if (Number(wrong.rows[0]!.n) > 0) log(`seed: WARNING: ${wrong.rows[0]!.n} sampled tickets differ from what ticket create would store`);
    // The counts the dashboard reads are computed from the tickets loaded.
    await a.query('SELECT ticketd_rebuild_ticket_counts()');
    log(`seed: tickets and tags loaded in ${((Date.now() - loadStarted) / 1000).toFixed(1)} s; rebuilding ${indexes.rows.length} indexes`);

    const indexStarted = Date.now();
    const pending = [...indexes.rows].sort((x, y) => (y.def.includes('gin') ? 1 : 0) - (x.def.includes('gin') ? 1 : 0));
    await Promise.all(
      [a, b].map(async (c) => {
        for (let ix = pending.shift(); ix; ix = pending.shift()) await c.query(ix.def);
      }),
    );
    log(`seed: indexes rebuilt in ${((Date.now() - indexStarted) / 1000).toFixed(1)} s; vacuum analyze`);
    await Promise.all([a.query('VACUUM (ANALYZE) tickets'), b.query('VACUUM (ANALYZE) ticket_tags, ticket_counts')]);
    await a.query('ANALYZE contacts, companies, members, categories, tags');
    await a.query('DROP TABLE bench_text');
    const live = await a.query<{ n: string }>('SELECT count(*) AS n FROM tickets WHERE deleted_at IS NULL AND NOT is_spam AND brand_id = ANY($1::text[])', [brands]);
    return {
      seconds: (Date.now() - started) / 1000,
      memberIds,
      tagIds: tags.rows.map((r) => r.id),
      categoryIds: categories.rows.map((r) => r.id),
      contactEmails: contacts.rows.map((r) => r.email),
      liveTickets: Number(live.rows[0]!.n),
      words,
    };
  } finally {
    await a.end();
    await b.end();
  }
}
