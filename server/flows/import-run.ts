import { createHash } from 'node:crypto';
import pMap from 'p-map';
import type { TenantCtx } from '../core/context.js';
import { HttpError } from '../core/errors.js';
import { newId, ID_PREFIX } from '../core/ids.js';
import { tenantScope } from '../core/model.js';
import type { StagedObject, Storage } from '../core/ports.js';
import { scanFile } from '../core/scanning.js';
import { SourceFileTooLarge } from '../integrations/import-http.js';
import {
  importCtx,
  importObject,
  insertNewTickets,
  mappingsOf,
  reserveNumbers,
  ticketExists,
  writeTicket,
  type ImportedAttachment,
  type ImportedComment,
  type ImportedTicket,
  type Mapping,
  type Outcome,
  type TicketWriteResult,
} from './import-writer.js';

/**
 * What every importer shares (decision 0123): the run (its options, its cursor saved after each
 * page, its counts and report), one reference object written or counted, and a ticket written
 * whole with its comments and its files (read from the source, checked, scanned and staged before
 * the transaction). An importer brings a source reader and the mapping of its source's kinds.
 */

export interface ImportOptions {
  /** A ticket keeps the source's number when it is free in the brand. */
  keepNumbers: boolean;
  /** Read and count; write nothing. */
  dryRun: boolean;
  /** Only tickets updated at or after this instant (a final delta before the switch-over). */
  since: string | null;
  /** The upload limit: larger files are skipped and reported. */
  maxBytes: number;
  /** The user's map (--map FILE). */
  map?: ImportMap;
  /** Told of every object (the CLI prints them with --json, and moves its bar). */
  onObject?: (event: ObjectEvent) => void;
  /** Told of notes (an assignee no member of the target, …). */
  onNote?: (note: string) => void;
  /** Told, before the tickets, about how many the source has (for a progress bar). */
  onTicketTotal?: (total: number) => void;
}

/**
 * `--map FILE`: statuses by key, field definitions by `<entityType>.<key>` (ticket, customer,
 * company), each to a key of the target brand's. A mapped status is not created and the tickets
 * in it take the target's; a mapped ticket field is not created and tickets' customFields carry
 * its value under the target's key. What the map does not name is created (`unmapped: 'create'`,
 * the default) or left out (`'skip'`: a status the target brand lacks is not created and its
 * tickets are skipped; a field is not created and its values are left out of tickets).
 */
export interface ImportMap {
  statuses?: Record<string, string>;
  fields?: Record<string, string>;
  unmapped?: 'create' | 'skip';
}

export interface ObjectEvent {
  kind: string;
  sourceId: string;
  outcome: Outcome | 'skipped';
  targetId: string | null;
  reason?: string;
  /** Tickets: the number in the source and in the target, when they differ. */
  renumbered?: { from: number; to: number };
}

export type KindCounts = Record<string, { created: number; updated: number; unchanged: number; skipped: number }>;

export interface ImportReport {
  runId: string | null;
  source: string;
  resumed: boolean;
  dryRun: boolean;
  counts: KindCounts;
  skipped: { kind: string; sourceId: string; reason: string }[];
  renumbered: { sourceId: string; from: number; to: number }[];
  /** What --map mapped instead of creating (once per brand). */
  mapped: { kind: 'status' | 'field'; from: string; to: string }[];
  notes: string[];
  /** What the source has that this importer does not copy. */
  notCopied: string[];
}

/** At most this many skips and renumberings are listed one by one in the report (all are counted). */
const LISTED = 1000;

/**
 * The tables an import fills. Into a new install they grow from nothing within minutes, faster
 * than autovacuum's ANALYZE follows: planned on the statistics of a nearly empty table, a lookup
 * by id took an index on the brand and filtered tens of thousands of rows (50 ms a ticket). So a
 * run analyzes them itself, as PostgreSQL advises after a bulk load, each time its rows created
 * have doubled since the last time (from 1,000): a few times a run.
 */
const FILLED_TABLES = ['contacts', 'companies', 'tickets', 'comments', 'ticket_tags', 'attachments', 'import_mappings'];
const FIRST_ANALYZE_AFTER = 1000;

/** The version a second run compares: the object's updatedAt, else a digest of what the source showed. */
export function versionOf(o: Record<string, unknown>): string {
  if (typeof o.updatedAt === 'string') return o.updatedAt;
  return createHash('sha256').update(JSON.stringify(o)).digest('hex').slice(0, 32);
}

/**
 * One run of an importer against one source, into one account and mode. Its state (where it is:
 * the importer's own shape) is saved with the counts after every page; a run of the same source
 * with the same options that was not finished is taken up again, else a new one starts. A dry run
 * has no row.
 */
export class ImportRun<S extends object> {
  readonly ctx: TenantCtx;
  readonly report: ImportReport;
  /** Objects this process created, and how many when the filled tables were last analyzed. */
  private created = 0;
  private analyzedAt = 0;

  private constructor(
    base: TenantCtx,
    readonly source: string,
    readonly options: ImportOptions,
    public state: S,
    private readonly id: string | null,
    notCopied: string[],
  ) {
    this.ctx = importCtx(base);
    this.report = { runId: id, source, resumed: false, dryRun: options.dryRun, counts: {}, skipped: [], renumbered: [], mapped: [], notes: [], notCopied };
  }

  /**
   * The run to go on with: the source's latest unfinished run made with the same options (its
   * cursors belong to its listing order: a delta never takes over an interrupted full run, nor the
   * other way round), else a new one starting at `initial`.
   */
  static async open<S extends object>(base: TenantCtx, source: string, options: ImportOptions, initial: S, notCopied: string[]): Promise<ImportRun<S>> {
    if (options.dryRun) return new ImportRun(base, source, options, initial, null, notCopied);
    const asked = { keepNumbers: options.keepNumbers, since: options.since, map: options.map ?? null };
    const { rows } = (await base.db.raw(
      `select r.id, r.state, r.counts from import_runs r where ? and r.source = ? and r.finished_at is null and r.options = ?::jsonb order by r.started_at desc limit 1`,
      [tenantScope(base, 'r'), source, JSON.stringify(asked)],
    )) as { rows: { id: string; state: S; counts: KindCounts }[] };
    if (rows[0]) {
      const run = new ImportRun(base, source, options, rows[0].state, rows[0].id, notCopied);
      run.report.resumed = true;
      Object.assign(run.report.counts, rows[0].counts);
      return run;
    }
    const id = newId(ID_PREFIX.importRun);
    await base.db.raw(`insert into import_runs (account_id, livemode, id, source, options, state) values (?, ?, ?, ?, ?::jsonb, ?::jsonb)`, [
      base.accountId,
      base.livemode,
      id,
      source,
      JSON.stringify(asked),
      JSON.stringify(initial),
    ]);
    return new ImportRun(base, source, options, initial, id, notCopied);
  }

  /** Counts an object's outcome, lists skips and renumberings, and tells the caller. */
  count(e: ObjectEvent): void {
    const c = (this.report.counts[e.kind] ??= { created: 0, updated: 0, unchanged: 0, skipped: 0 });
    c[e.outcome]++;
    if (e.outcome === 'created') this.created++;
    if (e.outcome === 'skipped' && this.report.skipped.length < LISTED) this.report.skipped.push({ kind: e.kind, sourceId: e.sourceId, reason: e.reason ?? '' });
    if (e.renumbered && this.report.renumbered.length < LISTED) this.report.renumbered.push({ sourceId: e.sourceId, ...e.renumbered });
    this.options.onObject?.(e);
  }

  /** Notes a mapping --map made, once. */
  mapped(m: ImportReport['mapped'][number]): void {
    if (!this.report.mapped.some((x) => x.kind === m.kind && x.from === m.from && x.to === m.to)) this.report.mapped.push(m);
  }

  /** Saves where the run is (after each page), and brings the filled tables' statistics up to date when they have grown. */
  async save(): Promise<void> {
    await this.write(false);
    if (this.created - this.analyzedAt >= Math.max(FIRST_ANALYZE_AFTER, this.analyzedAt)) {
      this.analyzedAt = this.created;
      // Tables only: no tenant's rows are read or written. One the database user does not own is skipped with a warning.
      await this.ctx.db.raw(`analyze ${FILLED_TABLES.join(', ')}`);
    }
  }

  /** Marks the run finished and gives its report. */
  async finish(): Promise<ImportReport> {
    await this.write(true);
    return this.report;
  }

  private async write(finished: boolean): Promise<void> {
    if (!this.id) return;
    // The clock's time as a value: Citus refuses now() within a CASE.
    const now = new Date(this.ctx.services.now());
    await this.ctx.db.raw(`update import_runs r set state = ?::jsonb, counts = ?::jsonb, updated_at = ?, finished_at = ? where ? and r.id = ?`, [
      JSON.stringify(this.state),
      JSON.stringify(this.report.counts),
      now,
      finished ? now : null,
      tenantScope(this.ctx, 'r'),
      this.id,
    ]);
  }

  /** What the import made of the objects `sourceIds` of `kind`. */
  mappings(kind: string, sourceIds: readonly string[]): Promise<Map<string, Mapping>> {
    return mappingsOf(this.ctx, this.source, kind, sourceIds);
  }

  /**
   * One reference object (a status, a contact, …) through importObject, or counted only in a dry
   * run; a refusal of the target (a 4xx) skips it and says why. Gives the target's id, or null.
   */
  async one(
    kind: string,
    sourceId: string,
    version: string,
    write: { create(tx: TenantCtx): Promise<string>; update(tx: TenantCtx, targetId: string): Promise<void> },
  ): Promise<string | null> {
    try {
      const known = (await this.mappings(kind, [sourceId])).get(sourceId);
      const done = this.options.dryRun
        ? { outcome: (!known ? 'created' : known.version === version ? 'unchanged' : 'updated') as Outcome, targetId: known?.targetId ?? null }
        : await importObject(this.ctx, { source: this.source, kind, sourceId, version }, known, write);
      this.count({ kind, sourceId, outcome: done.outcome, targetId: done.targetId });
      return done.targetId;
    } catch (err) {
      if (!(err instanceof HttpError) || err.statusCode >= 500) throw err;
      this.count({ kind, sourceId, outcome: 'skipped', targetId: null, reason: `the target refused it: ${err.message}` });
      return null;
    }
  }

  /**
   * Whether a ticket must be read whole and written: not when its version is the one imported
   * (counted unchanged), nor in a dry run (counted as what a real run would do). `page`: the
   * mappings of the tickets of its page, when read together.
   */
  async ticketToWrite(sourceId: string, version: string, page?: ReadonlyMap<string, Mapping>): Promise<{ write: false } | { write: true; known: Mapping | undefined }> {
    const known = (page ?? (await this.mappings('ticket', [sourceId]))).get(sourceId);
    if (known && known.version === version) {
      this.count({ kind: 'ticket', sourceId, outcome: 'unchanged', targetId: known.targetId });
      return { write: false };
    }
    if (this.options.dryRun) {
      this.count({ kind: 'ticket', sourceId, outcome: known ? 'updated' : 'created', targetId: known?.targetId ?? null });
      return { write: false };
    }
    return { write: true, known };
  }

  /** One ticket (writeTickets of one). */
  async writeTicket(
    key: { sourceId: string; version: string },
    known: Mapping | undefined,
    ticket: ImportedTicket,
    comments: readonly ImportedComment[],
    files: readonly SourceFile[],
  ): Promise<string | null> {
    return (await this.writeTickets([{ key, known, ticket, comments, files }]))[0]!;
  }

  /**
   * Tickets with their comments and files. Those new to the target without files are inserted
   * together, a brand's in one transaction (insertNewTickets: its statements refuse nothing a
   * source sends; a failure stops the run, to be resumed). The others each have a transaction of
   * their own, several at a time: the files the import has not copied yet are read from the source
   * first (checked against the source's checksum, held to the upload limit, scanned as uploads
   * are; each one that fails is skipped and reported), then the ticket is written with writeTicket
   * (one the target refuses, a 4xx, is skipped and reported). The numbers of those inserted are
   * reserved together first. Counts the tickets, their comments and their files. Gives each target
   * ticket's id, or null when it was skipped.
   */
  async writeTickets(items: readonly TicketToWrite[]): Promise<(string | null)[]> {
    // A ticket deleted in the target since is written again whole: its files too.
    const still = await pMap(items, (it) => (it.known ? ticketExists(this.ctx, it.ticket.brandId, it.known.targetId) : false), { concurrency: IN_FLIGHT });
    const numbers = new Map<TicketToWrite, number>();
    for (const brandId of new Set(items.map((it) => it.ticket.brandId))) {
      const inserted = items.filter((it, i) => !still[i] && it.ticket.brandId === brandId);
      const reserved = await reserveNumbers(
        this.ctx,
        brandId,
        inserted.map((it) => it.ticket),
      );
      inserted.forEach((it, i) => numbers.set(it, reserved[i]!));
    }
    const together: TicketToWrite[] = [];
    const alone: { it: TicketToWrite; stillThere: boolean }[] = [];
    items.forEach((it, i) => (!still[i] && !it.files.length ? together.push(it) : alone.push({ it, stillThere: still[i]! })));
    const written = new Map<TicketToWrite, string | null>();
    await Promise.all([
      ...[...new Set(together.map((it) => it.ticket.brandId))].map(async (brandId) => {
        const of = together.filter((it) => it.ticket.brandId === brandId);
        const results = await insertNewTickets(
          this.ctx,
          this.source,
          of.map((it) => ({ key: it.key, number: numbers.get(it)!, t: it.ticket, comments: it.comments })),
        );
        of.forEach((it, i) => written.set(it, this.counted(it, results[i]!)));
      }),
      pMap(alone, async ({ it, stillThere }) => written.set(it, await this.writeOne(it, stillThere, numbers.get(it) ?? null)), { concurrency: IN_FLIGHT }),
    ]);
    return items.map((it) => written.get(it) ?? null);
  }

  private async writeOne(it: TicketToWrite, stillThere: boolean, number: number | null): Promise<string | null> {
    const { key, known, ticket } = it;
    const knownFiles = stillThere
      ? await this.mappings(
          'attachment',
          it.files.map((f) => f.ref),
        )
      : new Map<string, Mapping>();
    const files = await this.stageFiles(it.files.filter((f) => !knownFiles.has(f.ref)));
    try {
      return this.counted(it, await writeTicket(this.ctx, this.source, key, stillThere ? known : undefined, ticket, it.comments, files, number));
    } catch (err) {
      if (!(err instanceof HttpError) || err.statusCode >= 500) throw err;
      this.count({ kind: 'ticket', sourceId: key.sourceId, outcome: 'skipped', targetId: null, reason: `the target refused it: ${err.message}` });
      return null;
    }
  }

  /** Counts what was written of a ticket: it, its comments and its files. Gives its id. */
  private counted(it: TicketToWrite, written: TicketWriteResult): string {
    const { key, ticket } = it;
    for (const [kind, c] of [
      ['comment', written.comments],
      ['attachment', { ...written.attachments, updated: 0 }],
    ] as const) {
      for (const outcome of ['created', 'updated', 'unchanged'] as const)
        for (let i = 0; i < c[outcome]; i++) this.count({ kind, sourceId: key.sourceId, outcome, targetId: written.ticketId });
    }
    const renumbered = ticket.ticketNumber !== null && ticket.ticketNumber !== written.ticketNumber ? { from: ticket.ticketNumber, to: written.ticketNumber } : undefined;
    this.count({ kind: 'ticket', sourceId: key.sourceId, outcome: written.outcome, targetId: written.ticketId, renumbered });
    return written.ticketId;
  }

  /** The files read, checked and scanned; on any failure that stops the run, those staged are discarded. */
  private async stageFiles(sourceFiles: readonly SourceFile[]): Promise<ImportedAttachment[]> {
    const files: ImportedAttachment[] = [];
    const skip = (f: SourceFile, reason: string) => this.count({ kind: 'attachment', sourceId: f.ref, outcome: 'skipped', targetId: null, reason });
    try {
      for (const f of sourceFiles) {
        if (f.unavailable) {
          skip(f, f.unavailable);
          continue;
        }
        let staged: StagedObject;
        try {
          staged = await f.stage(this.ctx.services.storage, this.options.maxBytes);
        } catch (err) {
          if (!(err instanceof SourceFileTooLarge)) throw err;
          skip(f, err.message);
          continue;
        }
        if (f.sha256 && f.sha256 !== staged.sha256) {
          await staged.discard();
          skip(f, 'its bytes did not match the checksum the source gave');
          continue;
        }
        // Scanned as an upload is; the scanner down under scanFailure refuse stops the run (503), to be resumed.
        const scan = await scanFile(this.ctx.services, () => staged.read(), { importedAttachment: f.ref }).catch(async (err: unknown) => {
          await staged.discard();
          throw err;
        });
        if ('infected' in scan) {
          await staged.discard();
          skip(f, `it contains a virus (${scan.infected})`);
          continue;
        }
        const { stage: _stage, sha256: _sha, unavailable: _unavailable, ...rest } = f;
        files.push({ ...rest, staged, scanStatus: scan.status });
      }
    } catch (err) {
      await Promise.all(files.map((f) => f.staged.discard()));
      throw err;
    }
    return files;
  }
}

/** A ticket as an importer read it, to be written whole. */
export interface TicketToWrite {
  key: { sourceId: string; version: string };
  /** What an earlier run made of it (ticketToWrite). */
  known: Mapping | undefined;
  ticket: ImportedTicket;
  comments: readonly ImportedComment[];
  files: readonly SourceFile[];
}

/**
 * How many objects an importer reads and writes at a time: each waits on the source or the
 * database most of its time, so a few side by side keep both busy (within the CLI's pool of 10).
 */
export const IN_FLIGHT = 8;

/** A file of the source's, described before its bytes are read. */
export interface SourceFile extends Omit<ImportedAttachment, 'staged' | 'scanStatus'> {
  /** The SHA-256 the source gives of its bytes, when it gives one (hex). */
  sha256?: string | null;
  /** Why it cannot be copied, when the source says so (a pending upload, …): skipped with this reason. */
  unavailable?: string;
  /** Streams its bytes into the storage's staging, held to `maxBytes` (SourceFileTooLarge above). */
  stage(storage: Storage, maxBytes: number): Promise<StagedObject>;
}
