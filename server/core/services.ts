import type { Config } from './config.js';
import type { Db } from './db.js';
import type { MailTransport, Scanner, Storage } from './ports.js';

/** The implementations of core/ports.ts a process uses, made from its configuration (server/compose.ts wires the integrations). */
export interface Adapters {
  storage(config: Config, log: (line: string) => void): Storage;
  mailTransport(config: Config, log: (line: string) => void): MailTransport;
  /** null: scanning is off. */
  scanner(config: Config): Scanner | null;
}

/**
 * What a process's services are built with, once, by createServices (server/compose.ts): the API, a dispatcher-only
 * process and every CLI command alike. Everything that lives longer than a call (caches, the ticket
 * create batcher, compiled validators) hangs off the Services it returns, never off a module, so
 * two apps in one process (tests run several) never share one, and every role gets the same
 * configuration (mail settings included).
 */
export interface ServiceDeps {
  config: Config;
  /** The connection pool. */
  db: Db;
  /** A pool on a streaming replica (config databaseReadUrl) for the reads core/read-replica.ts routes; default none. */
  readDb?: Db | null;
  /** The database without a pooler in between, for LISTEN (config databaseDirectUrl); default: db's own URL. */
  directUrl?: string | null;
  /** Milliseconds since the epoch; tests may move it. */
  clock?: () => number;
  /** Where services report what callers are not told (a Fastify or CLI logger). */
  logger?: ServiceLogger;
  /** Makes the defaults of storage and mailTransport. */
  adapters: Adapters;
  /** Outbound mail; default from the configuration (file or SMTP), made when first asked for. */
  mailTransport?: MailTransport;
  /** Attachment files; default: local disk under dataDir. */
  storage?: Storage;
  /** The virus scanner of uploads; default from the configuration (null: none). */
  scanner?: Scanner | null;
}

export interface ServiceLogger {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

/**
 * A piece of per-process state owned by a domain (its cache, its batcher), declared next to the
 * code that uses it and made the first time a Services instance is asked for it.
 */
export interface Part<T> {
  readonly name: string;
  make(services: Services): T;
  close?(value: T): Promise<void> | void;
}

export function part<T>(name: string, make: (services: Services) => T, close?: (value: T) => Promise<void> | void): Part<T> {
  return { name, make, close };
}

export interface Services {
  readonly config: Config;
  readonly db: Db;
  readonly readDb: Db | null;
  readonly directUrl: string | null;
  now(): number;
  readonly log: ServiceLogger;
  readonly storage: Storage;
  readonly mailTransport: MailTransport;
  /** The virus scanner every upload goes through before it is kept; null: scanning is off. */
  readonly scanner: Scanner | null;
  /** The part's value in this instance: made on first use, then the same every time. */
  get<T>(part: Part<T>): T;
  /** Closes every part that was made (in reverse order) and the mail transport if it was made here. */
  close(): Promise<void>;
}

const quiet: ServiceLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };

export function assembleServices(deps: ServiceDeps): Services {
  const made = new Map<Part<unknown>, unknown>();
  let transport = deps.mailTransport ?? null;
  let storage = deps.storage ?? null;
  let scanner = deps.scanner;
  const log = deps.logger ?? quiet;
  const services: Services = {
    config: deps.config,
    db: deps.db,
    readDb: deps.readDb ?? null,
    directUrl: deps.directUrl ?? null,
    now: deps.clock ?? Date.now,
    log,
    get storage() {
      return (storage ??= deps.adapters.storage(deps.config, (line) => log.warn({}, line)));
    },
    get scanner() {
      if (scanner === undefined) scanner = deps.adapters.scanner(deps.config);
      return scanner;
    },
    get mailTransport() {
      // file (the default) writes .eml files under the data directory and logs one line each.
      return (transport ??= deps.adapters.mailTransport(deps.config, (line) => log.info({}, line)));
    },
    get<T>(p: Part<T>): T {
      if (!made.has(p)) made.set(p, p.make(services));
      return made.get(p) as T;
    },
    async close() {
      for (const [p, value] of [...made].reverse()) await p.close?.(value);
      made.clear();
      if (transport && !deps.mailTransport) transport.close();
    },
  };
  return services;
}
