import { readFileSync, writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import type { ApplyReport } from '../../server/flows/rules-as-code.js';
import { withServices } from '../database.js';
import { brandCtx } from '../context.js';
import { emit, emitText, UsageError } from '../io.js';
import type { GlobalOptions } from '../globals.js';

/** The lines a person reads of an apply: what was (or would be) added, changed and removed. */
function reportLines(r: ApplyReport): string[] {
  const would = r.dryRun ? 'would be ' : '';
  const lines = [
    ...r.added.map((i) => `added ${i.kind.slice(0, -1)} "${i.name}"`),
    ...r.changed.map((i) => `changed ${i.kind.slice(0, -1)} "${i.name}"`),
    ...r.removed.map((i) => `removed ${i.kind.slice(0, -1)} "${i.name}"`),
    ...r.reordered.map((kind) => `reordered ${kind}`),
  ];
  const summary = `${r.added.length} ${would}added, ${r.changed.length} ${would}changed, ${r.removed.length} ${would}removed, ${r.unchanged} unchanged`;
  return [...(r.dryRun ? lines.map((l) => `(dry run) ${l}`) : lines), r.dryRun ? `${summary} (dry run: nothing written)` : summary];
}

function readDocument(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${file} is not JSON: ${(err as Error).message}`);
  }
}

export function registerRules(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('rules').description("a brand's triggers, automations and shared macros and views, as one JSON document (rules as code)");
  const config = () => loadConfig({ configFile: globals().config });

  cmd
    .command('export <brandId>')
    .description('write the brand’s rules as one JSON document without ids (triggers and automations in the order they run)')
    .option('--file <file>', 'write it to this file instead of stdout')
    .action(async (brandId: string, opts: { file?: string }) => {
      const { exportRules } = await import('../../server/flows/rules-as-code.js');
      const doc = await withServices(config(), async (services) => exportRules(await brandCtx(services, brandId), brandId), { migrate: true });
      const text = `${JSON.stringify(doc, null, 2)}\n`;
      if (opts.file) writeFileSync(opts.file, text);
      else emitText(text);
    });

  cmd
    .command('apply <brandId> <file>')
    .description('make the brand’s rules match the document, by name, in one transaction; a kind the document leaves out is left alone')
    .option('--dry-run', 'report what would change, writing nothing (the same checks as a real apply)')
    .option('--prune', 'also remove the rules of each kind listed that the document does not name')
    .option('--json', 'JSON output: { dryRun, added, changed, removed, reordered, unchanged }')
    .action(async (brandId: string, file: string, opts: { dryRun?: boolean; prune?: boolean; json?: boolean }) => {
      const doc = readDocument(file);
      const { applyRules } = await import('../../server/flows/rules-as-code.js');
      const report = await withServices(
        config(),
        async (services) => applyRules(await brandCtx(services, brandId), brandId, doc, { dryRun: Boolean(opts.dryRun), prune: Boolean(opts.prune) }),
        { migrate: true },
      );
      emit(Boolean(opts.json), report, () => reportLines(report));
    });
}
