import type { FastifyInstance } from 'fastify';
import { BrandParams } from '../core/schemas.js';
import {
  CreateRecurringBody,
  RecurringListOut,
  RecurringListQuery,
  RecurringParams,
  RecurringTicketOut,
  UpdateRecurringBody,
  type CreateRecurringInput,
  type RecurringListInput,
  type UpdateRecurringInput,
} from '../domains/recurring-tickets/schemas.js';
import * as recurring from '../domains/recurring-tickets/service.js';
import { TicketOut } from '../domains/tickets/schemas.js';
import { createRecurring, resumeRecurring, runNow, updateRecurring } from '../flows/recurring-tickets.js';

type InBrand<B = undefined> = { Params: { brandId: string }; Body: B };
type InRecurring<B = undefined> = { Params: { brandId: string; recurringId: string }; Body: B };

/** A brand's recurring tickets. Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId. */
export async function recurringTicketRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Recurring tickets'];
  const read = { auth: ['api-key', 'session'], permission: 'recurring:read' } as const;
  const write = { auth: ['api-key', 'session'], permission: 'recurring:write' } as const;
  const run = { auth: ['api-key', 'session'], permission: 'recurring:run' } as const;
  const entitlement = '403 plan_feature_unavailable when the plan does not include recurring tickets';

  app.get<{ Params: { brandId: string }; Querystring: RecurringListInput }>(
    '/recurring-tickets',
    {
      config: read,
      schema: {
        tags,
        summary: 'List the brand’s recurring tickets: { data, total }, the next due first by default',
        params: BrandParams,
        querystring: RecurringListQuery,
        response: { 200: RecurringListOut },
      },
    },
    async (req) => recurring.list(req.ctx, req.params.brandId, req.query),
  );

  app.post<InBrand<CreateRecurringInput>>(
    '/recurring-tickets',
    {
      config: write,
      schema: {
        tags,
        summary: `Create a recurring ticket: its template and a schedule or a cron expression; the server computes nextRunAt. ${entitlement}`,
        params: BrandParams,
        body: CreateRecurringBody,
        response: { 201: RecurringTicketOut },
      },
    },
    async (req, reply) => reply.status(201).send(await createRecurring(req.ctx, req.params.brandId, req.body)),
  );

  app.get<InRecurring>(
    '/recurring-tickets/:recurringId',
    { config: read, schema: { tags, summary: 'Get a recurring ticket', params: RecurringParams, response: { 200: RecurringTicketOut } } },
    async (req) => recurring.get(req.ctx, req.params.brandId, req.params.recurringId),
  );

  app.patch<InRecurring<UpdateRecurringInput>>(
    '/recurring-tickets/:recurringId',
    {
      config: write,
      schema: {
        tags,
        summary:
          'Change any of its fields; a new schedule, cron expression or time zone moves nextRunAt. enabled: true is a resume (and needs the entitlement, 403 plan_feature_unavailable)',
        params: RecurringParams,
        body: UpdateRecurringBody,
        response: { 200: RecurringTicketOut },
      },
    },
    async (req) => updateRecurring(req.ctx, req.params.brandId, req.params.recurringId, req.body),
  );

  app.delete<InRecurring>(
    '/recurring-tickets/:recurringId',
    {
      config: write,
      schema: { tags, summary: 'Delete a recurring ticket (the tickets it opened stay); returns it', params: RecurringParams, response: { 200: RecurringTicketOut } },
    },
    async (req) => recurring.remove(req.ctx, req.params.brandId, req.params.recurringId),
  );

  app.post<InRecurring>(
    '/recurring-tickets/:recurringId/pause',
    {
      config: write,
      schema: { tags, summary: 'Pause it (no body); pausing a paused one changes nothing', params: RecurringParams, response: { 200: RecurringTicketOut } },
    },
    async (req) => recurring.pause(req.ctx, req.params.brandId, req.params.recurringId),
  );

  app.post<InRecurring>(
    '/recurring-tickets/:recurringId/resume',
    {
      config: write,
      schema: {
        tags,
        summary: `Resume it (no body): due next at its first time after now, the runs missed while paused not made up. ${entitlement}`,
        params: RecurringParams,
        response: { 200: RecurringTicketOut },
      },
    },
    async (req) => resumeRecurring(req.ctx, req.params.brandId, req.params.recurringId),
  );

  app.post<InRecurring>(
    '/recurring-tickets/:recurringId/run',
    {
      config: run,
      schema: {
        tags,
        summary: `Open its ticket now (no body): 201 with the ticket, as POST …/tickets answers; nextRunAt stays. ${entitlement}`,
        params: RecurringParams,
        response: { 201: TicketOut },
      },
    },
    async (req, reply) => reply.status(201).send(await runNow(req.ctx, req.params.brandId, req.params.recurringId)),
  );
}
