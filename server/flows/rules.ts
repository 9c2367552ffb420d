import type { TenantCtx } from '../core/context.js';
import { withTx } from '../core/context.js';
import { requireBrand, type Brand } from '../core/brand.js';
import { badRequest } from '../core/errors.js';
import * as categories from '../domains/categories/service.js';
import * as members from '../domains/members/service.js';
import { CUSTOM_FIELD_PREFIX, type Action, type Condition, type Conditions, type RuleKind, type RuleView } from '../domains/rules/schemas.js';
import * as rules from '../domains/rules/service.js';
import { templateProblem } from '../domains/rules/templates.js';
import * as statuses from '../domains/statuses/service.js';
import * as webhooks from '../domains/webhooks/service.js';

/**
 * Saving a rule (a trigger, an automation; a macro's actions too): everything it names must be the
 * brand's, checked when it is saved, so a rule that runs never fails on a typo. A reference found
 * missing later (deleted since) disables the rule instead (flows/triggers.ts).
 */

export interface Problem {
  field: string;
  message: string;
}

/** What rules name that must exist in the brand, each with the paths naming it. */
interface Named {
  statuses: Map<string, string[]>;
  categories: Map<string, string[]>;
  members: Map<string, string[]>;
  webhooks: Map<string, string[]>;
  fields: Map<string, string[]>;
  templates: { path: string; template: string }[];
}

function namedBy(conditions: Conditions | null, actions: readonly Action[], prefix = ''): Named {
  const named: Named = { statuses: new Map(), categories: new Map(), members: new Map(), webhooks: new Map(), fields: new Map(), templates: [] };
  const note = (into: Map<string, string[]>, key: unknown, path: string) => {
    if (typeof key !== 'string') return;
    into.set(key, [...(into.get(key) ?? []), path]);
  };
  const values = (c: Condition) => (Array.isArray(c.value) ? c.value : [c.value]);
  for (const part of ['all', 'any'] as const) {
    (conditions?.[part] ?? []).forEach((c, i) => {
      const path = `${prefix}conditions.${part}[${i}]`;
      if (c.field.startsWith(CUSTOM_FIELD_PREFIX)) note(named.fields, c.field.slice(CUSTOM_FIELD_PREFIX.length), `${path}.field`);
      const into = c.field === 'status' ? named.statuses : c.field === 'categoryId' ? named.categories : c.field === 'assigneeId' ? named.members : null;
      if (into && !['present', 'absent', 'changed', 'contains', 'not_contains', 'starts_with', 'ends_with'].includes(c.operator)) {
        for (const v of values(c)) if (v !== null) note(into, v, `${path}.value`);
      }
    });
  }
  actions.forEach((a, i) => {
    const path = `${prefix}actions[${i}].value`;
    switch (a.type) {
      case 'set_status':
        return note(named.statuses, a.value, path);
      case 'set_category':
        return note(named.categories, a.value, path);
      case 'set_field':
        return note(named.fields, a.value.key, `${path}.key`);
      case 'assign':
        if (a.value !== null && typeof a.value === 'object') return a.value.roundRobin.forEach((m, j) => note(named.members, m, `${path}.roundRobin[${j}]`));
        return note(named.members, a.value, path);
      case 'add_watchers':
        return a.value.forEach((m, j) => note(named.members, m, `${path}[${j}]`));
      case 'mail_members':
        (a.value.to ?? []).forEach((m, j) => note(named.members, m, `${path}.to[${j}]`));
        named.templates.push({ path: `${path}.subject`, template: a.value.subject }, { path: `${path}.body`, template: a.value.body });
        return;
      case 'mail_customer':
        named.templates.push({ path: `${path}.subject`, template: a.value.subject }, { path: `${path}.body`, template: a.value.body });
        return;
      case 'add_note':
        named.templates.push({ path, template: a.value });
        return;
      case 'webhook':
        return note(named.webhooks, a.value, path);
      default:
        return;
    }
  });
  return named;
}

/** Every reference of these conditions and actions the brand lacks, by path (none: []). */
export async function referenceProblems(tx: TenantCtx, brand: Brand, conditions: Conditions | null, actions: readonly Action[], prefix = ''): Promise<Problem[]> {
  const named = namedBy(conditions, actions, prefix);
  const problems: Problem[] = [];
  const missing = (into: Map<string, string[]>, known: Set<string>, what: string) => {
    for (const [key, paths] of into) if (!known.has(key)) for (const field of paths) problems.push({ field, message: `${key} is not ${what}` });
  };
  if (named.statuses.size) missing(named.statuses, new Set((await statuses.list(tx, brand.id)).map((s) => s.key)), 'a status of this brand');
  if (named.categories.size) missing(named.categories, new Set((await categories.list(tx, brand.id)).map((c) => c.id)), 'a category of this brand');
  if (named.members.size) {
    const active = (await members.findMany(tx, [...named.members.keys()])).filter((m) => m.status === 'active');
    missing(named.members, new Set(active.map((m) => m.id)), 'an active member of this account');
  }
  if (named.webhooks.size) missing(named.webhooks, new Set((await webhooks.list(tx, brand.id)).map((w) => w.id)), 'a webhook of this brand');
  if (named.fields.size) missing(named.fields, new Set((brand.fieldRules.ticket ?? []).map((f) => f.key)), 'a ticket field of this brand');
  for (const t of named.templates) {
    const problem = templateProblem(tx.services, t.template);
    if (problem) problems.push({ field: t.path, message: `is not a usable template: ${problem}` });
  }
  return problems;
}

export function invalidReferences(problems: readonly Problem[]) {
  const first = problems[0]!;
  return badRequest(`${first.field}: ${first.message}`, [...problems], 'invalid_rule');
}

/** A condition on a duration belongs to automations alone (their schema says so too). */
async function checked(tx: TenantCtx, brandId: string, conditions: Conditions | undefined, actions: readonly Action[] | undefined, current?: RuleView) {
  const brand = await requireBrand(tx, brandId);
  const problems = await referenceProblems(tx, brand, conditions ?? current?.conditions ?? null, actions ?? current?.actions ?? []);
  if (problems.length) throw invalidReferences(problems);
}

export async function createRule(ctx: TenantCtx, brandId: string, kind: RuleKind, input: rules.RuleInput): Promise<RuleView> {
  return withTx(ctx, async (tx) => {
    await checked(tx, brandId, input.conditions, input.actions);
    return rules.create(tx, brandId, kind, input);
  });
}

/** A rule saved again is checked whole, the parts not sent included (they may name something since deleted). */
export async function updateRule(ctx: TenantCtx, brandId: string, kind: RuleKind, id: string, input: rules.RuleChange): Promise<RuleView> {
  return withTx(ctx, async (tx) => {
    const current = await rules.get(tx, brandId, kind, id);
    await checked(tx, brandId, input.conditions, input.actions, current);
    return rules.update(tx, brandId, kind, id, input);
  });
}
