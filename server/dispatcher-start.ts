import type { Config } from './core/config.js';
import type { Services } from './core/services.js';
import { attachmentDepsOf } from './domains/attachments/service.js';
import { Dispatcher, type DispatcherLog } from './worker/dispatcher.js';
import { mailHandler } from './worker/handlers/mail.js';

/**
 * A process's dispatcher on its services, with the configured concurrency, webhook rules and mail
 * transport, started: `--role dispatcher` runs it on the main thread, `--role all` on a thread of
 * its own (dispatcher-thread.ts), each on the services' pool.
 */
export function startDispatcher(services: Services, log: DispatcherLog, config: Config): Dispatcher {
  const dispatcher = new Dispatcher(services, log, attachmentDepsOf(services), {
    concurrency: config.dispatcherConcurrency,
    webhooks: { allowPrivate: config.webhookAllowPrivate, timeoutMs: config.webhookTimeoutMs },
    handlers: { mail: mailHandler(services.mailTransport) },
    // Tests only: see OutboxOptions.holdRecurringRun.
    holdRecurringRun: process.env.TICKETD_TEST_HOLD_RECURRING_RUN || undefined,
    // Tests only: see OutboxOptions.holdCommercePage.
    holdCommercePage: process.env.TICKETD_TEST_HOLD_COMMERCE_PAGE ? Number(process.env.TICKETD_TEST_HOLD_COMMERCE_PAGE) : undefined,
  });
  dispatcher.start();
  return dispatcher;
}
