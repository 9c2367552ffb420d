import type { FastifyInstance } from 'fastify';

export interface Received {
  action: string;
  brandId: string;
  ticketId?: string;
  commentId?: string;
  reason?: string;
}

/** One raw message through POST /v1/inbound/email (latin1: 8-bit bytes pass unchanged); anything but 200 throws. */
export async function postInbound(app: FastifyInstance, secret: string, raw: string): Promise<Received> {
  const res = await app.inject({
    method: 'POST',
    url: '/v1/inbound/email',
    payload: Buffer.from(raw, 'latin1'),
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'message/rfc822' },
  });
  if (res.statusCode !== 200) throw new Error(`delivery failed: ${res.statusCode} ${res.body}`);
  return JSON.parse(res.body) as Received;
}
