import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import formbody from '@fastify/formbody';
import { Type } from 'typebox';
import { badRequest, HttpError } from '../core/errors.js';
import { sendPage } from '../core/page.js';
import * as csat from '../flows/feedback.js';
import { messagePage, ratingForm } from '../domains/feedback/page.js';
import { FeedbackPageOut, FeedbackTokenParams, MAX_FEEDBACK_COMMENT_LENGTH, RateBody, RatedOut, type RateInput } from '../domains/feedback/schemas.js';

/**
 * The public side of satisfaction ratings, without credentials: the mailed link's token is the key.
 * `/v1/feedback/{token}` is what a rating page calls (the dashboard's `/rate/[token]`); `/rate/{token}`
 * is ticketd's own page for installations without the dashboard.
 */
export async function feedbackRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Satisfaction'];
  const gone = { 410: { $ref: 'Error#', description: 'The link expired, or a later resolution replaced it' } };

  app.get<{ Params: { token: string } }>(
    '/v1/feedback/:token',
    {
      config: { auth: 'none', permission: 'feedback:read' },
      schema: {
        tags,
        summary: "A rating request by its mailed token: the ticket and the brand's rating type. 404 unknown, 409 already rated, 410 expired",
        params: FeedbackTokenParams,
        response: { 200: FeedbackPageOut, ...gone },
      },
    },
    async (req) => csat.ratingPage(req.baseCtx, req.params.token),
  );

  app.post<{ Params: { token: string }; Body: RateInput }>(
    '/v1/feedback/:token',
    {
      config: { auth: 'none', permission: 'feedback:rate' },
      schema: {
        tags,
        summary: 'Rate the resolution (once): thumbs 1 or -1, scale5 1-5, scale10 1-10, and an optional comment. 409 when already rated, 410 when expired',
        params: FeedbackTokenParams,
        body: RateBody,
        response: { 200: RatedOut, ...gone },
      },
    },
    async (req) => csat.rateByLink(req.baseCtx, req.params.token, req.body),
  );

  await app.register(ratingPageRoutes);
}

const RatingForm = Type.Object({
  rating: Type.String({ pattern: '^-?[0-9]{1,2}$' }),
  comment: Type.Optional(Type.String({ maxLength: MAX_FEEDBACK_COMMENT_LENGTH })),
});

/** An error as a page for a browser (it asks for HTML), in the status the API would answer; anyone else gets the error shape. */
function errorPage(req: FastifyRequest, reply: FastifyReply, err: unknown): FastifyReply {
  if (!(err instanceof HttpError) || err.statusCode >= 500 || !/text\/html/i.test(req.headers.accept ?? '')) throw err;
  const title = err.statusCode === 409 ? 'Already rated' : err.statusCode === 410 ? 'Link expired' : err.statusCode === 404 ? 'Link not found' : 'Not accepted';
  return sendPage(reply.status(err.statusCode), messagePage(title, err.message));
}

/** ticketd's own rating page (HTML), in a scope of its own: it alone parses urlencoded bodies. */
async function ratingPageRoutes(app: FastifyInstance): Promise<void> {
  await app.register(formbody, { bodyLimit: 16 * 1024 });
  const hide = { hide: true };

  app.get<{ Params: { token: string } }>(
    '/rate/:token',
    { config: { auth: 'none', permission: 'feedback:read' }, schema: { ...hide, params: FeedbackTokenParams } },
    async (req, reply) => {
      try {
        return sendPage(reply, ratingForm(await csat.ratingPage(req.baseCtx, req.params.token), `/rate/${encodeURIComponent(req.params.token)}`));
      } catch (err) {
        return errorPage(req, reply, err);
      }
    },
  );

  app.post<{ Params: { token: string }; Body: { rating: string; comment?: string } }>(
    '/rate/:token',
    { config: { auth: 'none', permission: 'feedback:rate' }, schema: { ...hide, params: FeedbackTokenParams, body: RatingForm }, attachValidation: true },
    async (req, reply) => {
      try {
        if (req.validationError) throw badRequest('Choose a rating', [{ field: 'rating', message: 'is required' }], 'validation_failed');
        await csat.rateByLink(req.baseCtx, req.params.token, { rating: Number(req.body.rating), comment: req.body.comment ?? null });
        return sendPage(reply, messagePage('Thank you', 'Your rating was received. Thank you for your feedback.'));
      } catch (err) {
        return errorPage(req, reply, err);
      }
    },
  );
}
