import type { FastifyInstance } from 'fastify';
import type { Config } from '../core/config.js';
import { forbidden } from '../core/errors.js';
import { AccountOut, CreateAccountBody, CreatedAccount, UsageOut, type CreateAccountInput } from '../domains/accounts/schemas.js';
import * as accounts from '../domains/accounts/service.js';
import { createAccount, usage } from '../flows/accounts.js';

export async function accountRoutes(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  app.post<{ Body: CreateAccountInput }>(
    '/v1/accounts',
    {
      config: { auth: 'none', permission: 'accounts:create', rateLimit: 'signup' },
      schema: {
        tags: ['Accounts'],
        summary: 'Create an account with its owner and first live and test API keys (secrets shown once)',
        body: CreateAccountBody,
        response: { 201: CreatedAccount },
      },
    },
    async (req, reply) => {
      if (opts.config.signup === 'closed') {
        throw forbidden('Sign-up is closed on this server; an administrator creates accounts with `ticketd accounts create`', 'signup_closed');
      }
      return reply.status(201).send(await createAccount(req.baseCtx, req.body));
    },
  );

  app.get(
    '/v1/accounts/me',
    {
      config: { auth: ['api-key', 'session'], permission: 'account:read' },
      schema: { tags: ['Accounts'], summary: 'The account of the API key or session', response: { 200: AccountOut } },
    },
    async (req) => accounts.get(req.ctx),
  );

  app.get(
    '/v1/accounts/me/usage',
    {
      config: { auth: ['api-key', 'session'], permission: 'account:read' },
      schema: { tags: ['Accounts'], summary: 'Usage in the mode of the API key (live for a session)', response: { 200: UsageOut } },
    },
    async (req) => usage(req.ctx),
  );
}
