import type { FastifyInstance } from 'fastify';
import { BrandParams } from '../core/schemas.js';
import {
  ApplyMacroBody,
  ApplyMacroOut,
  CreateMacroBody,
  MacroListOut,
  MacroOut,
  MacroParams,
  PreviewMacroBody,
  PreviewMacroOut,
  UpdateMacroBody,
  type ApplyMacroInput,
  type CreateMacroInput,
  type PreviewMacroInput,
  type UpdateMacroInput,
} from '../domains/macros/schemas.js';
import * as macros from '../domains/macros/service.js';
import { applyMacro, createMacro, previewMacro, updateMacro } from '../flows/macros.js';

type InBrand<B = undefined> = { Params: { brandId: string }; Body: B };
type InMacro<B = undefined> = { Params: { brandId: string; macroId: string }; Body: B };

/**
 * A brand's macros: shared in the brand (owners and admins manage them) or personal to a member.
 * Any member lists, applies and previews those they see. Mounted under /v1/brands/:brandId and
 * /v1/workspaces/:brandId.
 */
export async function macroRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Macros'];
  const read = { auth: ['api-key', 'session'], permission: 'macros:read' } as const;
  const write = { auth: ['api-key', 'session'], permission: 'macros:write' } as const;
  const apply = { auth: ['api-key', 'session'], permission: 'macros:apply' } as const;
  const rights =
    'visibility brand takes an owner, an admin or an API key (403 insufficient_role for a member); personal takes a member’s session (400 personal_needs_member for an API key)';
  const invalid = '400 invalid_rule names the path of anything its actions name that the brand lacks, or a comment template that does not parse';

  app.get<InBrand>(
    '/macros',
    {
      config: read,
      schema: { tags, summary: 'List the macros the caller sees: the brand’s, and their own personal ones, by name', params: BrandParams, response: { 200: MacroListOut } },
    },
    async (req) => macros.list(req.ctx, req.params.brandId),
  );

  app.post<InBrand<CreateMacroInput>>(
    '/macros',
    {
      config: write,
      schema: {
        tags,
        summary: `Create a macro: actions (a trigger’s) and an optional comment template. ${rights}. ${invalid}; 400 empty_macro without either; 409 macro_name_taken`,
        params: BrandParams,
        body: CreateMacroBody,
        response: { 201: MacroOut },
      },
    },
    async (req, reply) => reply.status(201).send(await createMacro(req.ctx, req.params.brandId, req.body)),
  );

  app.get<InMacro>(
    '/macros/:macroId',
    { config: read, schema: { tags, summary: 'Get a macro (another member’s personal macro is 404)', params: MacroParams, response: { 200: MacroOut } } },
    async (req) => macros.get(req.ctx, req.params.brandId, req.params.macroId),
  );

  app.patch<InMacro<UpdateMacroInput>>(
    '/macros/:macroId',
    {
      config: write,
      schema: {
        tags,
        summary: `Change any of its fields; it is checked whole again. ${rights}. ${invalid}`,
        params: MacroParams,
        body: UpdateMacroBody,
        response: { 200: MacroOut },
      },
    },
    async (req) => updateMacro(req.ctx, req.params.brandId, req.params.macroId, req.body),
  );

  app.delete<InMacro>(
    '/macros/:macroId',
    { config: write, schema: { tags, summary: `Delete a macro; returns it. ${rights}`, params: MacroParams, response: { 200: MacroOut } } },
    async (req) => macros.remove(req.ctx, req.params.brandId, req.params.macroId),
  );

  app.post<InMacro<ApplyMacroInput>>(
    '/macros/:macroId/apply',
    {
      config: apply,
      schema: {
        tags,
        summary:
          'Apply it to { ticketId } or { ticketIds } (at most 100), one transaction per ticket, as the caller’s own change (the brand’s triggers run on it): { data: [{ ticketId, ok, ticket, comment } or { ticketId, ok: false, error }] } in the order given',
        params: MacroParams,
        body: ApplyMacroBody,
        response: { 200: ApplyMacroOut },
      },
    },
    async (req) => applyMacro(req.ctx, req.params.brandId, req.params.macroId, req.body),
  );

  app.post<InMacro<PreviewMacroInput>>(
    '/macros/:macroId/preview',
    {
      config: read,
      schema: {
        tags,
        summary: 'The ticket and the comment as applying it would leave them (the brand’s triggers included). Writes nothing',
        params: MacroParams,
        body: PreviewMacroBody,
        response: { 200: PreviewMacroOut },
      },
    },
    async (req) => previewMacro(req.ctx, req.params.brandId, req.params.macroId, req.body.ticketId),
  );
}
