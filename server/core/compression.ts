import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply } from 'fastify';

/**
 * Compressed JSON for clients that ask for it (decision 0103). A list page of 50 tickets is about
 * 78 kB of JSON and a fifth of that compressed; writing it costs more than compressing it, even on
 * loopback, and on a real network its time is its bytes. Responses under COMPRESS_MIN_BYTES go as
 * they are: they fit a few packets, and compressing them would cost more than it saves.
 */
export const COMPRESS_MIN_BYTES = 4096;

export type Coding = 'br' | 'gzip';

/**
 * The coding to answer an Accept-Encoding with: brotli when accepted, else gzip, else none
 * (identity). A coding with q=0 is refused; `*` accepts gzip.
 */
export function codingFor(header: string | undefined): Coding | null {
  if (!header) return null;
  const accepted = new Set<string>();
  for (const part of header.toLowerCase().split(',')) {
    const [name, ...params] = part.split(';').map((p) => p.trim());
    const q = params.find((p) => p.startsWith('q='));
    if (name && !(q && Number(q.slice(2)) === 0)) accepted.add(name === 'x-gzip' ? 'gzip' : name);
  }
  if (accepted.has('br')) return 'br';
  if (accepted.has('gzip') || accepted.has('*')) return 'gzip';
  return null;
}

/** Brotli at quality 1 compresses a page as tightly as gzip -1 in about half the time. */
const BROTLI = { params: { [constants.BROTLI_PARAM_QUALITY]: 1, [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT } };

/** Adds a field to Vary, keeping what other hooks put there. */
export function appendVary(reply: FastifyReply, fields: string): void {
  const current = reply.getHeader('vary');
  reply.header('vary', current ? `${String(current)}, ${fields}` : fields);
}

/**
 * An onSend hook, registered after the conditional reads' (whose ETag is of the uncompressed body,
 * weak, so one tag names both codings of a body, RFC 9110 8.8.1): a JSON body of at least
 * COMPRESS_MIN_BYTES is compressed when the request accepts br or gzip, and says that it varies by
 * Accept-Encoding either way. Streams, empty bodies (a 304) and bodies already encoded pass as they are.
 */
export function installCompression(app: FastifyInstance): void {
  app.addHook('onSend', async (req, reply, payload) => {
    if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return payload;
    if (reply.hasHeader('content-encoding') || !String(reply.getHeader('content-type') ?? '').startsWith('application/json')) return payload;
    if (Buffer.byteLength(payload) < COMPRESS_MIN_BYTES) return payload;
    appendVary(reply, 'Accept-Encoding');
    const coding = codingFor(req.headers['accept-encoding']);
    if (!coding) return payload;
    reply.header('content-encoding', coding);
    reply.removeHeader('content-length');
    return coding === 'br' ? brotliCompressSync(payload, BROTLI) : gzipSync(payload, { level: 1 });
  });
}
