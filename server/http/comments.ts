import type { FastifyInstance } from 'fastify';
import {
  CommentList,
  CommentOut,
  CommentParams,
  CommentTicketParams,
  CreateCommentBody,
  IdempotencyHeaders,
  TicketCommentParams,
  UpdateCommentBody,
  type CreateCommentInput,
  type UpdateCommentInput,
} from '../domains/comments/schemas.js';
import * as comments from '../domains/comments/service.js';
import { createComment } from '../flows/comment-create.js';
import { isDashboardCaller } from '../core/client-shapes.js';

type TicketRoute<B = undefined> = { Params: { brandId: string; ticketId: string }; Body: B };
type CommentRoute<B = undefined> = { Params: { brandId: string; ticketId?: string; commentId: string }; Body: B };

/**
 * Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId. A comment is reachable at
 * /tickets/:ticketId/comments/:commentId and at the SDK's short path /comments/:commentId.
 */
export async function commentRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Comments'];
  const read = { auth: ['api-key', 'session'], permission: 'comments:read' } as const;
  const write = { auth: ['api-key', 'session'], permission: 'comments:write' } as const;

  app.get<TicketRoute>(
    '/tickets/:ticketId/comments',
    {
      config: { ...read, conditional: true },
      schema: {
        tags,
        summary: 'List the comments of a ticket (bare array, oldest first): every comment to a session, threads (top-level comments with their replies) to an API key',
        params: CommentTicketParams,
        response: { 200: CommentList },
      },
    },
    async (req) => comments.list(req.ctx, req.params.brandId, req.params.ticketId, isDashboardCaller(req.ctx) ? 'flat' : 'threads'),
  );

  app.post<TicketRoute<CreateCommentInput> & { Headers: { 'x-idempotency-key'?: string } }>(
    '/tickets/:ticketId/comments',
    {
      config: write,
      schema: {
        tags,
        summary:
          'Add a comment (201); bumps commentCount and updatedAt, applies setStatus in the same transaction; with X-Idempotency-Key a repeat returns the first comment (200)',
        params: CommentTicketParams,
        headers: IdempotencyHeaders,
        body: CreateCommentBody,
        response: { 201: CommentOut, 200: CommentOut },
      },
    },
    async (req, reply) => {
      const result = await createComment(req.ctx, req.params.brandId, req.params.ticketId, req.body, req.headers['x-idempotency-key']);
      return reply.status(result.created ? 201 : 200).send(result.comment);
    },
  );

  for (const [path, params] of [
    ['/tickets/:ticketId/comments/:commentId', TicketCommentParams],
    ['/comments/:commentId', CommentParams],
  ] as const) {
    app.get<CommentRoute>(
      path,
      {
        config: read,
        schema: { tags, summary: 'Get a comment (with its thread when it is top-level)', params, response: { 200: CommentOut } },
      },
      async (req) => comments.get(req.ctx, req.params.brandId, req.params.commentId, req.params.ticketId),
    );

    app.patch<CommentRoute<UpdateCommentInput>>(
      path,
      {
        config: write,
        schema: {
          tags,
          summary: "Update a comment's body, links or metadata (replaced; an internal note stays internal unless metadata.isInternal is false)",
          params,
          body: UpdateCommentBody,
          response: { 200: CommentOut },
        },
      },
      async (req) => comments.update(req.ctx, req.params.brandId, req.params.commentId, req.body, req.params.ticketId),
    );

    app.delete<CommentRoute>(
      path,
      {
        config: write,
        schema: { tags, summary: 'Soft-delete a comment; returns it with deletedAt; commentCount drops by one', params, response: { 200: CommentOut } },
      },
      async (req) => comments.remove(req.ctx, req.params.brandId, req.params.commentId, req.params.ticketId),
    );
  }
}
