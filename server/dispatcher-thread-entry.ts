/**
 * The dispatcher thread of a `--role all` process (see dispatcher-thread.ts): its own pool and
 * services, a dispatcher on them, and answers to its parent's scrapes and stop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { createServices } from './compose.js';
import { createDb } from './core/db.js';
import { dispatcherThreadFigures } from './core/metrics.js';
import type { ServiceLogger } from './core/services.js';
import { startDispatcher } from './dispatcher-start.js';
import type { DispatcherThreadData, FromThread, ToThread } from './dispatcher-thread.js';

/** A log line's details as they can cross to the parent: errors as their fields, what cannot be copied as text. */
function sendable(details: object): object {
  return Object.fromEntries(
    Object.entries(details).map(([k, v]) => {
      if (v instanceof Error) return [k, { type: v.name, message: v.message, stack: v.stack, code: (v as { code?: unknown }).code }];
      try {
        return [k, structuredClone(v)];
      } catch {
        return [k, String(v)];
      }
    }),
  );
}

const parent = parentPort!;
const send = (message: FromThread) => parent.postMessage(message);
const { config, databaseUrl, directUrl, poolMax, transactionPooling } = workerData as DispatcherThreadData;
const logger: ServiceLogger = {
  info: (details, msg) => send({ type: 'log', level: 'info', obj: sendable(details), msg }),
  warn: (details, msg) => send({ type: 'log', level: 'warn', obj: sendable(details), msg }),
  error: (details, msg) => send({ type: 'log', level: 'error', obj: sendable(details), msg }),
};
const db = createDb(databaseUrl, { poolMax, transactionPooling, applicationName: 'ticketd-dispatcher' });
const services = createServices({ config, db, directUrl, logger });
const dispatcher = startDispatcher(services, logger, config);

parent.on('message', (m: ToThread) => {
  if (m.type === 'figures') {
    void dispatcherThreadFigures(services).then((figures) => send({ type: 'figures', id: m.id, figures }));
  } else if (m.type === 'stop') {
    void (async () => {
      await dispatcher.stop(m.drainMs);
      await services.close();
      await db.destroy();
      send({ type: 'stopped' });
      parent.close();
    })();
  }
});
send({ type: 'started' });
