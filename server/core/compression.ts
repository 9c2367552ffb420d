import fastifyCompress from '@fastify/compress';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { constants } from 'node:zlib';

/**
 * Compressed JSON for clients that ask for it (decision 0103). A list page of 50 tickets is about
 * 78 kB of JSON and a fifth of that compressed; on a real network its time is its bytes. Responses
 * under COMPRESS_MIN_BYTES go as they are: they fit a few packets, and compressing them would cost
 * more than it saves.
 */
export const COMPRESS_MIN_BYTES = 4096;

/** Adds a field to Vary, keeping what other hooks put there. */
export function appendVary(reply: FastifyReply, fields: string): void {
  const current = reply.getHeader('vary');
  reply.header('vary', current ? `${String(current)}, ${fields}` : fields);
}

/**
 * @fastify/compress over the scope's JSON answers: brotli when accepted, else gzip, at their fastest
 * settings (brotli at quality 1 compresses a page as tightly as gzip -1 in about half the time).
 * Registered after the conditional reads, whose onSend hook runs first: their ETag is of the body
 * as built, weak, so one tag names both codings of a body (RFC 9110 8.8.1). Streams (attachments,
 * exports) and other types go as they are.
 */
export async function installCompression(api: FastifyInstance): Promise<void> {
  await api.register(fastifyCompress, {
    global: true,
    threshold: COMPRESS_MIN_BYTES,
    encodings: ['br', 'gzip'],
    customTypes: /^application\/json/,
    brotliOptions: { params: { [constants.BROTLI_PARAM_QUALITY]: 1, [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT } },
    zlibOptions: { level: 1 },
    removeContentLengthHeader: true,
  });
}
