import type { FastifyInstance } from 'fastify';
import { BrandParams } from '../core/schemas.js';
import {
  AutomationListOut,
  AutomationOut,
  CreateAutomationBody,
  CreateTriggerBody,
  ReorderBody,
  AutomationParams,
  TriggerParams,
  TestTriggerBody,
  TestTriggerOut,
  TriggerListOut,
  TriggerOut,
  UpdateAutomationBody,
  UpdateTriggerBody,
  type ReorderInput,
  type RuleKind,
  type TestTriggerInput,
} from '../domains/rules/schemas.js';
import * as rules from '../domains/rules/service.js';
import { createRule, updateRule } from '../flows/rules.js';
import { testTrigger } from '../flows/triggers.js';

type InBrand<B = undefined> = { Params: { brandId: string }; Body: B };
type InRule<B = undefined> = { Params: { brandId: string } & Record<string, string>; Body: B };

const KINDS = {
  trigger: {
    path: '/triggers',
    param: 'triggerId',
    params: TriggerParams,
    tag: 'Triggers',
    one: TriggerOut,
    list: TriggerListOut,
    create: CreateTriggerBody,
    update: UpdateTriggerBody,
    what: 'trigger (runs on ticket.created, ticket.updated or comment.created, in the change’s transaction)',
  },
  automation: {
    path: '/automations',
    param: 'automationId',
    params: AutomationParams,
    tag: 'Automations',
    one: AutomationOut,
    list: AutomationListOut,
    create: CreateAutomationBody,
    update: UpdateAutomationBody,
    what: 'automation (runs every minute on the tickets its conditions select, once per ticket until it changes)',
  },
} as const;

/**
 * A brand's triggers and automations: owners and admins manage them, any member reads them.
 * Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId.
 */
export async function ruleRoutes(app: FastifyInstance): Promise<void> {
  const read = { auth: ['api-key', 'session'], permission: 'rules:read' } as const;
  const write = { auth: ['api-key', 'session'], permission: 'rules:write' } as const;
  const invalid = '400 invalid_rule names the path of anything it refers to that the brand lacks (a status, category, member, webhook or field), or a template that does not parse';

  for (const kind of ['trigger', 'automation'] as RuleKind[]) {
    const k = KINDS[kind];
    const tags = [k.tag];
    app.get<InBrand>(
      k.path,
      { config: read, schema: { tags, summary: `List the brand’s ${kind}s in the order they run`, params: BrandParams, response: { 200: k.list } } },
      async (req) => rules.list(req.ctx, req.params.brandId, kind),
    );
    app.post<InBrand<rules.RuleInput>>(
      k.path,
      {
        config: write,
        schema: {
          tags,
          summary: `Create a ${k.what}. ${invalid}; 409 rule_name_taken; at most 500 enabled rules a brand, 64 KB each`,
          params: BrandParams,
          body: k.create,
          response: { 201: k.one },
        },
      },
      async (req, reply) => reply.status(201).send(await createRule(req.ctx, req.params.brandId, kind, req.body)),
    );
    app.post<InBrand<ReorderInput>>(
      `${k.path}/reorder`,
      {
        config: write,
        schema: { tags, summary: `Set the order ${kind}s run in: ids lists every one, each once`, params: BrandParams, body: ReorderBody, response: { 200: k.list } },
      },
      async (req) => rules.reorder(req.ctx, req.params.brandId, kind, req.body.ids),
    );
    app.get<InRule>(`${k.path}/:${k.param}`, { config: read, schema: { tags, summary: `Get a ${kind}`, params: k.params, response: { 200: k.one } } }, async (req) =>
      rules.get(req.ctx, req.params.brandId, kind, req.params[k.param]!),
    );
    app.patch<InRule<rules.RuleChange>>(
      `${k.path}/:${k.param}`,
      {
        config: write,
        schema: { tags, summary: `Change any of its fields; the ${kind} is checked whole again. ${invalid}`, params: k.params, body: k.update, response: { 200: k.one } },
      },
      async (req) => updateRule(req.ctx, req.params.brandId, kind, req.params[k.param]!, req.body),
    );
    app.delete<InRule>(
      `${k.path}/:${k.param}`,
      { config: write, schema: { tags, summary: `Delete a ${kind}; returns it`, params: k.params, response: { 200: k.one } } },
      async (req) => rules.remove(req.ctx, req.params.brandId, kind, req.params[k.param]!),
    );
  }

  app.post<InRule<TestTriggerInput>>(
    '/triggers/:triggerId/test',
    {
      config: read,
      schema: {
        tags: ['Triggers'],
        summary: 'Dry-run a trigger on a ticket: each condition’s result and the actions that would apply. Writes nothing',
        params: TriggerParams,
        body: TestTriggerBody,
        response: { 200: TestTriggerOut },
      },
    },
    async (req) => testTrigger(req.ctx, req.params.brandId, req.params.triggerId!, req.body.ticketId),
  );
}
