import type { FastifyReply } from 'fastify';
import { escapeHtml } from './text.js';

/**
 * ticketd's own small pages (the rating page, the local checkout page): one document shell and one
 * way of sending them. Plain HTML without script; every value is escaped by the caller's builder.
 */

const STYLE = `body{font-family:system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1f2937}
button{font-size:1rem;margin:.2rem;padding:.5rem .9rem;border:1px solid #9ca3af;border-radius:.4rem;background:#fff;cursor:pointer}
textarea{width:100%;min-height:5rem;margin:.8rem 0;font:inherit}`;

export function htmlDocument(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="robots" content="noindex"><title>${escapeHtml(title)}</title><style>${STYLE}</style></head><body>${body}</body></html>`;
}

/**
 * Sends a page under a Content-Security-Policy that allows nothing but its inline style and posting
 * its forms to this server; `formRedirectsAway`: a form whose answer redirects the browser to
 * another site (browsers hold that redirect to form-action too).
 */
export function sendPage(reply: FastifyReply, html: string, options: { formRedirectsAway?: boolean } = {}): FastifyReply {
  const formAction = options.formRedirectsAway ? "'self' https: http:" : "'self'";
  return reply
    .header('content-type', 'text/html; charset=utf-8')
    .header('content-security-policy', `default-src 'none'; style-src 'unsafe-inline'; form-action ${formAction}; frame-ancestors 'none'; base-uri 'none'`)
    .header('cache-control', 'no-store')
    .send(html);
}
