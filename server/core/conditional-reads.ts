import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { appendVary } from './compression.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The dashboard's polled reads: a 200 carries a weak ETag and `Cache-Control: private, no-cache`, and `If-None-Match` is answered with 304. */
    conditional?: true;
  }
}

/** What a conditional read answers besides its ETag: any cache may keep it for this caller only, and must ask again before each use. */
export const CONDITIONAL_CACHE_CONTROL = 'private, no-cache';

/**
 * The tag is a hash of who asks and the exact body they would get: any change a reader could see
 * (a field, a name, a ticket now hidden by a permission) changes it, whatever caused the change,
 * and one caller's tag never validates another caller's copy, though their bodies be equal.
 * The body is still built and serialized; a 304 saves the bytes on the wire and the client's work
 * (decision 0093 says why the tag is not derived from row versions).
 */
export function entityTag(req: FastifyRequest, body: string | Buffer): string {
  const { accountId, livemode, actor } = req.ctx;
  const hash = createHash('sha256').update(`${accountId}\n${livemode}\n${actor.type}\n${actor.id}\n`).update(body).digest('base64url');
  return `W/"${hash.slice(0, 27)}"`;
}

/** Whether an If-None-Match header names `tag` (weak comparison, RFC 9110 13.1.2), or is `*`. */
export function noneMatchNames(header: string | undefined, tag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  const opaque = tag.replace(/^W\//, '');
  return header.split(',').some((candidate) => candidate.trim().replace(/^W\//, '') === opaque);
}

/** On the routes that declare `config.conditional`: ETag and Cache-Control on a 200, and 304 when the caller already holds that body. */
export function installConditionalReads(app: FastifyInstance): void {
  app.addHook('onSend', async (req, reply, payload) => {
    if (!req.routeOptions.config?.conditional || reply.statusCode !== 200 || !req.ctx) return payload;
    if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return payload;
    const tag = entityTag(req, payload);
    reply.header('etag', tag);
    reply.header('cache-control', CONDITIONAL_CACHE_CONTROL);
    // A session may come as a cookie: a cache that keyed copies by URL alone would mix callers.
    appendVary(reply, 'Authorization, Cookie');
    if (!noneMatchNames(req.headers['if-none-match'], tag)) return payload;
    reply.code(304);
    reply.removeHeader('content-type');
    reply.removeHeader('content-length');
    return null;
  });
}
