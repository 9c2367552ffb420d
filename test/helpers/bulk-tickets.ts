/**
 * Many tickets of one brand in one statement (INSERT … SELECT generate_series), for what only
 * volume shows: a query's plan, a sweep's pace. Only the required columns and those given are
 * written (the derived list and search columns keep their defaults; status is open unless given);
 * a column's value is an SQL expression of `i`, the ticket's place in the batch (1…count).
 * Numbered after the brand's highest ticket number, a million up at least, clear of the numbers
 * ticket create hands out. The placeholders are `?`, each used once, in the order of `bindings`.
 */
export function bulkTickets(
  brand: { accountId: string; livemode: boolean; brandId: string },
  count: number,
  columns: Record<string, string> = {},
): { sql: string; bindings: unknown[] } {
  const values = { status: "'open'", ...columns };
  const names = Object.keys(values) as (keyof typeof values)[];
  return {
    sql: `insert into tickets (id, account_id, livemode, brand_id, ticket_number, title, ${names.join(', ')})
      select 'tkt_' || replace(gen_random_uuid()::text, '-', ''), ?, ?, ?,
        (select coalesce(max(t.ticket_number), 999999) from tickets t where t.account_id = ? and t.livemode = ? and t.brand_id = ?) + i,
        'Bulk ticket ' || i, ${names.map((c) => values[c]).join(', ')}
      from generate_series(1, ?::int) as i`,
    bindings: [brand.accountId, brand.livemode, brand.brandId, brand.accountId, brand.livemode, brand.brandId, count],
  };
}
