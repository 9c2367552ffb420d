import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { Type, type Static } from 'typebox';
import { dryRun, withTx, type TenantCtx } from '../core/context.js';
import { requireBrand } from '../core/brand.js';
import { badRequest, HttpError } from '../core/errors.js';
import { canonicalJson } from '../core/idempotency.js';
import { part } from '../core/services.js';
import { validationErrors } from '../core/validation.js';
import { CreateMacroBody, type CreateMacroInput, type MacroView, type UpdateMacroInput } from '../domains/macros/schemas.js';
import * as macros from '../domains/macros/service.js';
import { CreateAutomationBody, CreateTriggerBody, type RuleKind, type RuleView } from '../domains/rules/schemas.js';
import * as rules from '../domains/rules/service.js';
import { CreateViewBody, type CreateViewInput, type UpdateViewInput, type ViewView } from '../domains/views/schemas.js';
import * as views from '../domains/views/service.js';
import { createMacro, updateMacro } from './macros.js';
import { createRule, updateRule } from './rules.js';
import { createView, updateView } from './views.js';

/**
 * Rules as code: a brand's triggers, automations, and shared macros and views as one JSON
 * document without ids, and the brand made to match one, by name. Triggers and automations run in
 * the document's order. A kind the document leaves out is left alone; `prune` removes what a kind
 * it lists does not name. Personal macros and views are their members' and never touched. What a
 * rule names (statuses, categories, members, webhooks) is named by its key or id, as the API takes
 * it. An apply is one transaction: all of it, or (on the first refusal) none of it.
 */

const TriggerDoc = Type.Omit(CreateTriggerBody, ['position'], { additionalProperties: false });
const AutomationDoc = Type.Omit(CreateAutomationBody, ['position'], { additionalProperties: false });
const MacroDoc = Type.Omit(CreateMacroBody, ['visibility'], { additionalProperties: false });
const ViewDoc = Type.Omit(CreateViewBody, ['visibility'], { additionalProperties: false });
export const RulesDocument = Type.Object(
  {
    version: Type.Literal(1),
    triggers: Type.Optional(Type.Array(TriggerDoc, { maxItems: 1000 })),
    automations: Type.Optional(Type.Array(AutomationDoc, { maxItems: 1000 })),
    macros: Type.Optional(Type.Array(MacroDoc, { maxItems: 5000 })),
    views: Type.Optional(Type.Array(ViewDoc, { maxItems: 5000 })),
  },
  { additionalProperties: false },
);
export type RulesDocument = Static<typeof RulesDocument>;
type Section = 'triggers' | 'automations' | 'macros' | 'views';
const SECTIONS: readonly Section[] = ['triggers', 'automations', 'macros', 'views'];
type Item = { name: string } & Record<string, unknown>;

const documentValidator = part('rules.documentValidator', () => {
  const ajv = new Ajv({ allErrors: true, strict: false });
  addFormats.default(ajv);
  return ajv.compile(RulesDocument);
});

/** The document, or a 400 naming every problem; names are unique within each kind. */
export function checkDocument(ctx: TenantCtx, given: unknown): RulesDocument {
  const validate = ctx.services.get(documentValidator);
  if (!validate(given)) {
    const errors = validationErrors(validate.errors ?? []);
    throw badRequest(`The rules document is not valid: ${errors[0]?.field} ${errors[0]?.message}`, errors, 'invalid_rules_document');
  }
  const doc = given as RulesDocument;
  for (const section of SECTIONS) {
    const names = (doc[section] ?? []).map((i) => i.name.trim());
    const twice = names.find((n, i) => names.indexOf(n) !== i);
    if (twice !== undefined)
      throw badRequest(`${section} names "${twice}" twice: a document names each once`, [{ field: section, message: `"${twice}" is named twice` }], 'invalid_rules_document');
  }
  return doc;
}

const ruleItem = (r: RuleView): Item => ({
  name: r.name,
  enabled: r.enabled,
  ...(r.object === 'trigger' ? { on: r.on } : {}),
  conditions: r.conditions,
  actions: r.actions,
});
const macroItem = (m: MacroView): Item => ({ name: m.name, actions: m.actions, ...(m.comment ? { comment: m.comment } : {}) });
const viewItem = (v: ViewView): Item => ({ name: v.name, filters: v.filters, ...(v.sort.field ? { sort: v.sort } : { sort: { order: v.sort.order } }) });

/** What the brand has now, kind by kind, in the document's shape (triggers and automations in the order they run). */
async function current(tx: TenantCtx, brandId: string): Promise<Record<Section, (Item & { id: string })[]>> {
  const withId = <T extends { id: string }>(rows: readonly T[], item: (r: T) => Item) => rows.map((r) => ({ ...item(r), id: r.id }));
  return {
    triggers: withId((await rules.list(tx, brandId, 'trigger')).data, ruleItem),
    automations: withId((await rules.list(tx, brandId, 'automation')).data, ruleItem),
    macros: withId(
      (await macros.list(tx, brandId)).data.filter((m) => m.visibility === 'brand'),
      macroItem,
    ),
    views: withId(
      (await views.list(tx, brandId)).data.filter((v) => v.visibility === 'brand'),
      viewItem,
    ),
  };
}

export async function exportRules(ctx: TenantCtx, brandId: string): Promise<RulesDocument> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const now = await current(tx, brand.id);
    const strip = (items: (Item & { id: string })[]) => items.map(({ id: _, ...item }) => item);
    return { version: 1, ...Object.fromEntries(SECTIONS.map((s) => [s, strip(now[s])])) } as RulesDocument;
  });
}

export interface ApplyReport {
  dryRun: boolean;
  added: { kind: Section; name: string }[];
  changed: { kind: Section; name: string }[];
  removed: { kind: Section; name: string }[];
  /** Kinds whose run order changed (triggers, automations). */
  reordered: Section[];
  unchanged: number;
}

const RULE_KIND: Partial<Record<Section, RuleKind>> = { triggers: 'trigger', automations: 'automation' };

/** The writes of one kind, through the same checks as the API's. */
function writerOf(section: Section) {
  const kind = RULE_KIND[section];
  if (kind) {
    return {
      create: (tx: TenantCtx, brandId: string, item: Item) => createRule(tx, brandId, kind, item as unknown as rules.RuleInput),
      update: (tx: TenantCtx, brandId: string, id: string, item: Item) => updateRule(tx, brandId, kind, id, item as unknown as rules.RuleChange),
      remove: (tx: TenantCtx, brandId: string, id: string) => rules.remove(tx, brandId, kind, id),
    };
  }
  if (section === 'macros') {
    return {
      create: (tx: TenantCtx, brandId: string, item: Item) => createMacro(tx, brandId, { ...item, visibility: 'brand' } as unknown as CreateMacroInput),
      update: (tx: TenantCtx, brandId: string, id: string, item: Item) => updateMacro(tx, brandId, id, { comment: null, ...item } as unknown as UpdateMacroInput),
      remove: (tx: TenantCtx, brandId: string, id: string) => macros.remove(tx, brandId, id),
    };
  }
  return {
    create: (tx: TenantCtx, brandId: string, item: Item) => createView(tx, brandId, { ...item, visibility: 'brand' } as unknown as CreateViewInput),
    update: (tx: TenantCtx, brandId: string, id: string, item: Item) => updateView(tx, brandId, id, { sort: {}, ...item } as unknown as UpdateViewInput),
    remove: (tx: TenantCtx, brandId: string, id: string) => views.remove(tx, brandId, id),
  };
}

/** An item as the brand would store it, to compare with what it has: defaults filled in. */
function normalized(section: Section, item: Item): string {
  const filled: Record<string, unknown> = { ...item, name: item.name.trim() };
  if (RULE_KIND[section]) {
    const conditions = (item.conditions ?? {}) as { all?: unknown[]; any?: unknown[] };
    Object.assign(filled, { enabled: item.enabled ?? true, conditions: { all: conditions.all ?? [], any: conditions.any ?? [] } });
  }
  if (section === 'macros') {
    const comment = item.comment as { body: string; isInternal?: boolean } | null | undefined;
    if (comment) filled.comment = { body: comment.body, isInternal: comment.isInternal ?? false };
    else delete filled.comment;
  }
  if (section === 'views') {
    const sort = (item.sort ?? {}) as { field?: string; order?: string };
    filled.sort = { ...(sort.field ? { field: sort.field } : {}), order: sort.order ?? 'desc' };
  }
  return canonicalJson(filled);
}

/** A refusal of one item, said of its place in the document: `triggers[1] "Broken": actions[0].value: …`. */
async function inDocument<T>(write: Promise<T>, section: Section, index: number, name: string): Promise<T> {
  try {
    return await write;
  } catch (err) {
    if (!(err instanceof HttpError) || err.statusCode !== 400) throw err;
    const place = `${section}[${index}]`;
    throw new HttpError(
      400,
      err.code,
      `${place} "${name}": ${err.message}`,
      err.errors?.map((e) => ({ field: `${place}.${e.field}`, message: e.message })),
    );
  }
}

/**
 * Makes the brand match the document, by name, in one transaction (`dryRun`: the same writes,
 * rolled back, so the report is exactly what a real apply would do, refusals included).
 */
export async function applyRules(ctx: TenantCtx, brandId: string, given: unknown, options: { dryRun: boolean; prune: boolean }): Promise<ApplyReport> {
  const doc = checkDocument(ctx, given);
  const run = options.dryRun ? dryRun : withTx;
  return run(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const now = await current(tx, brand.id);
    const report: ApplyReport = { dryRun: options.dryRun, added: [], changed: [], removed: [], reordered: [], unchanged: 0 };
    for (const section of SECTIONS) {
      const wanted = doc[section] as Item[] | undefined;
      if (!wanted) continue;
      const write = writerOf(section);
      const have = new Map(now[section].map((i) => [i.name, i]));
      const names = new Set(wanted.map((i) => i.name.trim()));
      if (options.prune) {
        for (const old of now[section].filter((i) => !names.has(i.name))) {
          await write.remove(tx, brand.id, old.id);
          report.removed.push({ kind: section, name: old.name });
        }
      }
      const ids: string[] = [];
      for (const [index, item] of wanted.entries()) {
        const existing = have.get(item.name.trim());
        const at = (pending: Promise<{ id: string }>) => inDocument(pending, section, index, item.name);
        if (!existing) {
          ids.push((await at(write.create(tx, brand.id, item))).id);
          report.added.push({ kind: section, name: item.name.trim() });
        } else if (normalized(section, item) !== normalized(section, { ...existing, id: undefined } as unknown as Item)) {
          await at(write.update(tx, brand.id, existing.id, item));
          report.changed.push({ kind: section, name: existing.name });
          ids.push(existing.id);
        } else {
          report.unchanged++;
          ids.push(existing.id);
        }
      }
      const kind = RULE_KIND[section];
      if (kind) {
        // The document's order first; rules it does not name (kept without --prune) run after them.
        const positions = (await rules.list(tx, brand.id, kind)).data.map((r) => r.id);
        const order = [...ids, ...positions.filter((id) => !ids.includes(id))];
        if (positions.join() !== order.join()) {
          await rules.reorder(tx, brand.id, kind, order);
          const existed = (list: string[]) => list.filter((id) => now[section].some((i) => i.id === id)).join();
          if (existed(positions) !== existed(order)) report.reordered.push(section);
        }
      }
    }
    return report;
  });
}
