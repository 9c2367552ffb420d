import type { Knex } from 'knex';

/**
 * What the virus scan of an attachment's bytes found: clean, unscanned (the scanner was down and the
 * operator lets files through), or not_scanned (no scanner configured, or no bytes yet). A constant
 * default: the column is added without rewriting the table, and every file stored before is not_scanned.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE attachments ADD COLUMN scan_status text NOT NULL DEFAULT 'not_scanned'
    CONSTRAINT attachments_scan_status_check CHECK (scan_status IN ('clean', 'unscanned', 'not_scanned'))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE attachments DROP COLUMN scan_status');
}
