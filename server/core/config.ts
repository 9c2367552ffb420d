import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { packageRoot } from './paths.js';

export interface Config {
  readonly host: string;
  readonly port: number;
  readonly publicUrl: string | null;
  readonly databaseUrl: string | null;
  readonly databaseDirectUrl: string | null;
  readonly databaseReadUrl: string | null;
  readonly databaseTransactionPooling: boolean;
  readonly dataDir: string;
  readonly dbPoolMax: number;
  /**
   * With the API in the same process (role all), the connections of dbPoolMax the dispatcher keeps
   * in a pool of its own; null: dispatcherPoolShare's default; 0: one pool for both.
   */
  readonly dispatcherDbPoolMax: number | null;
  readonly bodyLimitBytes: number;
  readonly requestTimeoutMs: number;
  readonly headersTimeoutMs: number;
  readonly corsOrigins: readonly string[];
  readonly dashboardOrigins: readonly string[];
  readonly dashboardAllowLoopback: boolean;
  readonly ratingPageUrl: string | null;
  readonly sessionIdleTtlSeconds: number;
  readonly sessionMaxTtlSeconds: number;
  readonly authRateLimitPerIpPerHour: number;
  readonly authRateLimitPerEmailPerHour: number;
  readonly formRateLimitPerIpPerHour: number;
  readonly formRateLimitPerFormPerHour: number;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  readonly trustProxy: boolean;
  readonly signup: 'open' | 'closed';
  readonly signupRateLimitPerHour: number;
  readonly rateLimitWindowSeconds: number;
  /** 0: no limit. */
  readonly rateLimitPerApiKey: number;
  /** 0: no limit. */
  readonly rateLimitPerIp: number;
  readonly rateLimitSyncMs: number;
  readonly shutdownTimeoutMs: number;
  readonly attachmentMaxBytes: number;
  readonly attachmentUploadUrlTtlSeconds: number;
  readonly attachmentDownloadUrlTtlSeconds: number;
  readonly mailTransport: 'file' | 'smtp';
  readonly mailFrom: string;
  readonly mailSmtpHost: string | null;
  readonly mailSmtpPort: number;
  readonly mailSmtpSecure: boolean;
  readonly mailSmtpRequireTls: boolean;
  readonly mailSmtpUser: string | null;
  readonly mailSmtpPass: string | null;
  readonly inboundDomain: string;
  readonly inboundSecret: string | null;
  readonly inboundMaxBytes: number;
  readonly smtpPort: number | null;
  /** Which member mail on a thread becomes their AGENT comment: only with a From shown to be theirs (DKIM/DMARC), or any. */
  readonly inboundAgentReplies: 'authenticated' | 'any';
  /** What brands' sending domains publish in SPF; null: include:<inboundDomain>. */
  readonly mailSpfMechanism: string | null;
  /** Base64 keys that wrap stored secrets (core/sealed.ts); the first seals. Empty: keys in server_secrets. */
  readonly encryptionKeys: readonly string[];
  /** Resolvers domain verification asks (address or address:port); empty: the system's. */
  readonly dnsServers: readonly string[];
  readonly webhookAllowPrivate: boolean;
  readonly webhookTimeoutMs: number;
  /** Identity providers (single sign-on) on loopback or private addresses may be used; loopback ones over http too. */
  readonly ssoAllowPrivate: boolean;
  /** Deadline of one request to an identity provider (discovery, token, keys). */
  readonly ssoTimeoutMs: number;
  /** How often the dispatcher takes in a connected mailbox (seconds). */
  readonly mailboxPollSeconds: number;
  /** IMAP IDLE sessions a dispatcher keeps open at most (new mail taken in as it arrives); 0: poll only. */
  readonly mailboxIdleSessions: number;
  /** Bound on connecting to an IMAP server, its greeting, and each wait for it. */
  readonly mailboxTimeoutMs: number;
  /** OAuth clients GMAIL and OUTLOOK mailboxes sign in to IMAP through (XOAUTH2); a null id: that provider is not offered. */
  readonly googleClientId: string | null;
  readonly googleClientSecret: string | null;
  readonly googleTokenUrl: string;
  readonly microsoftClientId: string | null;
  readonly microsoftClientSecret: string | null;
  readonly microsoftTokenUrl: string;
  /** BigCommerce's API base (stores/{hash}/… hangs off it); a test points it at a fake store. */
  readonly commerceBigcommerceApiUrl: string;
  /** Deadline of one request to a connected store. */
  readonly commerceTimeoutMs: number;
  /** How often a connected store is synced again (its orders modified since the last sync), besides its notifications. */
  readonly commerceSyncMinutes: number;
  readonly dispatcherConcurrency: number;
  readonly dispatcherAccountConcurrency: number;
  /** Where a `--role dispatcher` process serves its health and metrics. */
  readonly dispatcherHost: string;
  /** null: no listener. */
  readonly dispatcherPort: number | null;
  readonly outboxRetentionDays: number;
  /** Days the raw bytes of an inbound message are kept for agents to read; 0: not kept. */
  readonly rawMailRetentionDays: number;
  readonly metricsEnabled: boolean;
  readonly metricsToken: string | null;
  /** Provider name → its Standard Webhooks signing secret. */
  readonly identityProviders: Readonly<Record<string, { readonly secret: string }>>;
  /** Where attachments, avatars and kept raw mail live (integrations/storage.ts, integrations/s3-storage.ts). */
  readonly storage: {
    readonly kind: 'local' | 's3';
    readonly bucket: string | null;
    readonly prefix: string;
    readonly endpoint: string | null;
    readonly region: string;
    readonly forcePathStyle: boolean;
    readonly accessKeyId: string | null;
    /** Never logged or shown. */
    readonly secretAccessKey: string | null;
    readonly presignedDownloads: boolean;
  };
  /** Virus scanning by clamd (integrations/clamd.ts): on when clamdSocket or clamdHost is set. */
  readonly scanning: {
    readonly clamdSocket: string | null;
    readonly clamdHost: string | null;
    readonly clamdPort: number;
    readonly timeoutMs: number;
    /** What an upload meets when clamd is down or slow: refused (503), or kept as unscanned. */
    readonly scanFailure: 'refuse' | 'allow';
  };
  readonly billingProvider: 'local' | 'stripe';
  /** The stripe provider's keys; apiUrl points the client elsewhere (a proxy, a test's server). */
  readonly stripe: { readonly secretKey: string | null; readonly webhookSecret: string | null; readonly apiUrl: string | null };
  readonly defaultPlan: string;
  readonly plans: readonly PlanConfig[];
  readonly coupons: readonly CouponConfig[];
  /** Emails of the people who run this installation (coupons); not a role in any organization. */
  readonly instanceAdmins: readonly string[];
  readonly bootstrap: {
    readonly ownerEmail: string;
    readonly ownerName: string;
    readonly accountName: string;
    readonly brandName: string;
  };
}

/** A plan on sale; a null limit is unlimited. */
export interface PlanConfig {
  readonly slug: string;
  readonly name: string;
  /** Per interval, in minor units. */
  readonly price: number;
  readonly currency: string;
  readonly interval: 'month' | 'year';
  readonly ticketsPerPeriod: number | null;
  readonly brands: number | null;
  readonly members: number | null;
  readonly customDomain: boolean;
  /** Recurring tickets (their scheduled runs included); absent: included. */
  readonly recurringTickets?: boolean;
  /** The Stripe price (price_…) of the plan: required on every paid plan with the stripe provider. */
  readonly stripePriceId?: string;
}

/** A discount on the invoice of a plan change: percentOff, or amountOff in a currency's minor units. */
export interface CouponConfig {
  readonly code: string;
  readonly percentOff?: number;
  readonly amountOff?: number;
  readonly currency?: string;
  /** Redemptions over every account; null: unlimited. An instance administrator may change it (stored). */
  readonly maxRedemptions: number | null;
  /** ISO date-time; absent: never expires. */
  readonly expiresAt?: string;
  /** Plan slugs it applies to; absent: every plan. */
  readonly plans?: readonly string[];
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/** port: an integer, or `off` for none (null). */
type Kind = 'string' | 'integer' | 'boolean' | 'list' | 'port';
/** Environment variables and the config keys they set. */
export const ENV_KEYS: Record<string, [string, Kind]> = {
  DATABASE_URL: ['databaseUrl', 'string'],
  DATABASE_DIRECT_URL: ['databaseDirectUrl', 'string'],
  DATABASE_READ_URL: ['databaseReadUrl', 'string'],
  TICKETD_DATABASE_TRANSACTION_POOLING: ['databaseTransactionPooling', 'boolean'],
  PORT: ['port', 'integer'],
  TICKETD_HOST: ['host', 'string'],
  TICKETD_PUBLIC_URL: ['publicUrl', 'string'],
  TICKETD_DATA_DIR: ['dataDir', 'string'],
  TICKETD_DB_POOL_MAX: ['dbPoolMax', 'integer'],
  TICKETD_DISPATCHER_DB_POOL_MAX: ['dispatcherDbPoolMax', 'integer'],
  TICKETD_BODY_LIMIT_BYTES: ['bodyLimitBytes', 'integer'],
  TICKETD_REQUEST_TIMEOUT_MS: ['requestTimeoutMs', 'integer'],
  TICKETD_HEADERS_TIMEOUT_MS: ['headersTimeoutMs', 'integer'],
  TICKETD_CORS_ORIGINS: ['corsOrigins', 'list'],
  TICKETD_DASHBOARD_ORIGINS: ['dashboardOrigins', 'list'],
  TICKETD_DASHBOARD_ALLOW_LOOPBACK: ['dashboardAllowLoopback', 'boolean'],
  TICKETD_RATING_PAGE_URL: ['ratingPageUrl', 'string'],
  TICKETD_SESSION_IDLE_TTL_SECONDS: ['sessionIdleTtlSeconds', 'integer'],
  TICKETD_SESSION_MAX_TTL_SECONDS: ['sessionMaxTtlSeconds', 'integer'],
  TICKETD_AUTH_RATE_LIMIT_PER_IP_PER_HOUR: ['authRateLimitPerIpPerHour', 'integer'],
  TICKETD_AUTH_RATE_LIMIT_PER_EMAIL_PER_HOUR: ['authRateLimitPerEmailPerHour', 'integer'],
  TICKETD_FORM_RATE_LIMIT_PER_IP_PER_HOUR: ['formRateLimitPerIpPerHour', 'integer'],
  TICKETD_FORM_RATE_LIMIT_PER_FORM_PER_HOUR: ['formRateLimitPerFormPerHour', 'integer'],
  TICKETD_LOG_LEVEL: ['logLevel', 'string'],
  TICKETD_TRUST_PROXY: ['trustProxy', 'boolean'],
  TICKETD_SIGNUP: ['signup', 'string'],
  TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: ['signupRateLimitPerHour', 'integer'],
  TICKETD_RATE_LIMIT_WINDOW_SECONDS: ['rateLimitWindowSeconds', 'integer'],
  TICKETD_RATE_LIMIT_PER_API_KEY: ['rateLimitPerApiKey', 'integer'],
  TICKETD_RATE_LIMIT_PER_IP: ['rateLimitPerIp', 'integer'],
  TICKETD_RATE_LIMIT_SYNC_MS: ['rateLimitSyncMs', 'integer'],
  TICKETD_SHUTDOWN_TIMEOUT_MS: ['shutdownTimeoutMs', 'integer'],
  TICKETD_ATTACHMENT_MAX_BYTES: ['attachmentMaxBytes', 'integer'],
  TICKETD_ATTACHMENT_UPLOAD_URL_TTL_SECONDS: ['attachmentUploadUrlTtlSeconds', 'integer'],
  TICKETD_ATTACHMENT_DOWNLOAD_URL_TTL_SECONDS: ['attachmentDownloadUrlTtlSeconds', 'integer'],
  TICKETD_MAIL_TRANSPORT: ['mailTransport', 'string'],
  TICKETD_MAIL_FROM: ['mailFrom', 'string'],
  TICKETD_MAIL_SMTP_HOST: ['mailSmtpHost', 'string'],
  TICKETD_MAIL_SMTP_PORT: ['mailSmtpPort', 'integer'],
  TICKETD_MAIL_SMTP_SECURE: ['mailSmtpSecure', 'boolean'],
  TICKETD_MAIL_SMTP_REQUIRE_TLS: ['mailSmtpRequireTls', 'boolean'],
  TICKETD_MAIL_SMTP_USER: ['mailSmtpUser', 'string'],
  TICKETD_MAIL_SMTP_PASS: ['mailSmtpPass', 'string'],
  TICKETD_INBOUND_DOMAIN: ['inboundDomain', 'string'],
  TICKETD_INBOUND_SECRET: ['inboundSecret', 'string'],
  TICKETD_INBOUND_MAX_BYTES: ['inboundMaxBytes', 'integer'],
  TICKETD_SMTP_PORT: ['smtpPort', 'integer'],
  TICKETD_INBOUND_AGENT_REPLIES: ['inboundAgentReplies', 'string'],
  TICKETD_MAIL_SPF_MECHANISM: ['mailSpfMechanism', 'string'],
  TICKETD_ENCRYPTION_KEYS: ['encryptionKeys', 'list'],
  TICKETD_DNS_SERVERS: ['dnsServers', 'list'],
  TICKETD_WEBHOOK_ALLOW_PRIVATE: ['webhookAllowPrivate', 'boolean'],
  TICKETD_WEBHOOK_TIMEOUT_MS: ['webhookTimeoutMs', 'integer'],
  TICKETD_SSO_ALLOW_PRIVATE: ['ssoAllowPrivate', 'boolean'],
  TICKETD_SSO_TIMEOUT_MS: ['ssoTimeoutMs', 'integer'],
  TICKETD_MAILBOX_POLL_SECONDS: ['mailboxPollSeconds', 'integer'],
  TICKETD_MAILBOX_IDLE_SESSIONS: ['mailboxIdleSessions', 'integer'],
  TICKETD_MAILBOX_TIMEOUT_MS: ['mailboxTimeoutMs', 'integer'],
  TICKETD_GOOGLE_CLIENT_ID: ['googleClientId', 'string'],
  TICKETD_GOOGLE_CLIENT_SECRET: ['googleClientSecret', 'string'],
  TICKETD_GOOGLE_TOKEN_URL: ['googleTokenUrl', 'string'],
  TICKETD_MICROSOFT_CLIENT_ID: ['microsoftClientId', 'string'],
  TICKETD_MICROSOFT_CLIENT_SECRET: ['microsoftClientSecret', 'string'],
  TICKETD_MICROSOFT_TOKEN_URL: ['microsoftTokenUrl', 'string'],
  TICKETD_COMMERCE_BIGCOMMERCE_API_URL: ['commerceBigcommerceApiUrl', 'string'],
  TICKETD_COMMERCE_TIMEOUT_MS: ['commerceTimeoutMs', 'integer'],
  TICKETD_COMMERCE_SYNC_MINUTES: ['commerceSyncMinutes', 'integer'],
  TICKETD_DISPATCHER_CONCURRENCY: ['dispatcherConcurrency', 'integer'],
  TICKETD_DISPATCHER_ACCOUNT_CONCURRENCY: ['dispatcherAccountConcurrency', 'integer'],
  TICKETD_DISPATCHER_HOST: ['dispatcherHost', 'string'],
  TICKETD_DISPATCHER_PORT: ['dispatcherPort', 'port'],
  TICKETD_OUTBOX_RETENTION_DAYS: ['outboxRetentionDays', 'integer'],
  TICKETD_RAW_MAIL_RETENTION_DAYS: ['rawMailRetentionDays', 'integer'],
  TICKETD_METRICS_ENABLED: ['metricsEnabled', 'boolean'],
  TICKETD_METRICS_TOKEN: ['metricsToken', 'string'],
  TICKETD_BILLING_PROVIDER: ['billingProvider', 'string'],
  TICKETD_STRIPE_SECRET_KEY: ['stripe.secretKey', 'string'],
  TICKETD_STRIPE_WEBHOOK_SECRET: ['stripe.webhookSecret', 'string'],
  TICKETD_STRIPE_API_URL: ['stripe.apiUrl', 'string'],
  TICKETD_STORAGE_KIND: ['storage.kind', 'string'],
  TICKETD_S3_BUCKET: ['storage.bucket', 'string'],
  TICKETD_S3_PREFIX: ['storage.prefix', 'string'],
  TICKETD_S3_ENDPOINT: ['storage.endpoint', 'string'],
  TICKETD_S3_REGION: ['storage.region', 'string'],
  TICKETD_S3_FORCE_PATH_STYLE: ['storage.forcePathStyle', 'boolean'],
  TICKETD_S3_ACCESS_KEY_ID: ['storage.accessKeyId', 'string'],
  TICKETD_S3_SECRET_ACCESS_KEY: ['storage.secretAccessKey', 'string'],
  TICKETD_S3_PRESIGNED_DOWNLOADS: ['storage.presignedDownloads', 'boolean'],
  TICKETD_CLAMD_SOCKET: ['scanning.clamdSocket', 'string'],
  TICKETD_CLAMD_HOST: ['scanning.clamdHost', 'string'],
  TICKETD_CLAMD_PORT: ['scanning.clamdPort', 'integer'],
  TICKETD_CLAMD_TIMEOUT_MS: ['scanning.timeoutMs', 'integer'],
  TICKETD_SCAN_FAILURE: ['scanning.scanFailure', 'string'],
  TICKETD_DEFAULT_PLAN: ['defaultPlan', 'string'],
  TICKETD_INSTANCE_ADMINS: ['instanceAdmins', 'list'],
  TICKETD_BOOTSTRAP_OWNER_EMAIL: ['bootstrap.ownerEmail', 'string'],
};

/** The config file's objects whose keys a file may give in part. */
const SECTIONS = ['bootstrap', 'stripe', 'storage', 'scanning'];

/** The config file that `ticketd init` writes and every command reads when present. */
export const DEFAULT_CONFIG_FILE = 'ticketd.config.json';

function readJson(file: string, problems: string[]): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(readFileSync(file, 'utf8'));
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
    problems.push(`${file}: must contain a JSON object`);
  } catch (err) {
    problems.push(`${file}: ${(err as Error).message}`);
  }
  return {};
}

function convert(raw: string, kind: Kind): unknown {
  // Leave unparseable values as strings: the schema then names the exact problem.
  if (kind === 'integer') return /^-?\d+$/.test(raw.trim()) ? Number(raw) : raw;
  if (kind === 'port') return raw.trim() === 'off' ? null : convert(raw, 'integer');
  if (kind === 'boolean') return raw === 'true' ? true : raw === 'false' ? false : raw;
  if (kind === 'list')
    return raw
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  return raw;
}

function setPath(target: Record<string, unknown>, dotted: string, value: unknown): void {
  const keys = dotted.split('.');
  let node = target;
  for (const key of keys.slice(0, -1)) {
    node[key] = { ...(node[key] as Record<string, unknown>) };
    node = node[key] as Record<string, unknown>;
  }
  node[keys[keys.length - 1]!] = value;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

export interface LoadConfigOptions {
  env?: NodeJS.ProcessEnv;
  configFile?: string;
  cwd?: string;
}

/** defaults < config file < environment; validated (every problem listed) and frozen. */
export function loadConfig(options: LoadConfigOptions = {}): Config {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const problems: string[] = [];
  const defaults = readJson(path.join(packageRoot, 'config', 'default.json'), problems);
  const merged: Record<string, unknown> = structuredClone(defaults);

  const explicitFile = options.configFile ?? env.TICKETD_CONFIG;
  const file = explicitFile ? path.resolve(cwd, explicitFile) : path.join(cwd, DEFAULT_CONFIG_FILE);
  if (explicitFile && !existsSync(file)) problems.push(`${file}: config file not found`);
  if (existsSync(file)) {
    const fromFile = readJson(file, problems);
    for (const [key, value] of Object.entries(fromFile)) {
      // A section given in part keeps the defaults of the rest.
      merged[key] = SECTIONS.includes(key) && value && typeof value === 'object' ? { ...(merged[key] as object), ...(value as object) } : value;
    }
  }
  for (const [name, [key, kind]] of Object.entries(ENV_KEYS)) {
    const raw = env[name];
    if (raw !== undefined && raw !== '') setPath(merged, key, convert(raw, kind));
  }

  const schema = readJson(path.join(packageRoot, 'config', 'schema.json'), problems);
  const ajv = new Ajv({ allErrors: true, strict: false });
  addFormats.default(ajv);
  const validate = ajv.compile(schema);
  if (!validate(merged)) {
    for (const e of validate.errors ?? []) {
      const where = e.instancePath.replace(/^\//, '').replace(/\//g, '.') || '(root)';
      const extra = e.keyword === 'additionalProperties' ? ` (${String(e.params.additionalProperty)})` : '';
      const envName = Object.entries(ENV_KEYS).find(([, [k]]) => k === where)?.[0];
      problems.push(`${where}${envName ? ` (${envName})` : ''}: ${e.message}${extra}`);
    }
  }
  if (!problems.length)
    problems.push(
      ...planProblems(merged as unknown as Config),
      ...couponProblems(merged as unknown as Config),
      ...poolProblems(merged as unknown as Config),
      ...scanningProblems(merged as unknown as Config),
    );
  if (problems.length) throw new ConfigError(problems);
  const config = merged as unknown as { dataDir: string };
  config.dataDir = path.resolve(cwd, config.dataDir);
  return deepFreeze(merged as unknown as Config);
}

/**
 * What the schema cannot say of the plans: slugs are unique, and the default plan is one of them.
 * With the stripe provider: its keys are set, and every paid plan names its own Stripe price.
 */
function planProblems(config: Pick<Config, 'plans' | 'defaultPlan' | 'billingProvider' | 'stripe'>): string[] {
  const slugs = config.plans.map((p) => p.slug);
  const problems = slugs.filter((s, i) => slugs.indexOf(s) !== i).map((s) => `plans: the slug ${s} is used twice`);
  if (!slugs.includes(config.defaultPlan)) problems.push(`defaultPlan (TICKETD_DEFAULT_PLAN): ${config.defaultPlan} is not one of plans (${slugs.join(', ')})`);
  if (config.billingProvider !== 'stripe') return problems;
  if (!config.stripe.secretKey) problems.push('stripe.secretKey (TICKETD_STRIPE_SECRET_KEY): required with billingProvider stripe');
  if (!config.stripe.webhookSecret) problems.push('stripe.webhookSecret (TICKETD_STRIPE_WEBHOOK_SECRET): required with billingProvider stripe');
  for (const plan of config.plans) if (plan.price > 0 && !plan.stripePriceId) problems.push(`plans: ${plan.slug} is paid and names no stripePriceId (billingProvider stripe)`);
  const prices = config.plans.map((p) => p.stripePriceId).filter((id): id is string => Boolean(id));
  for (const id of prices.filter((id, i) => prices.indexOf(id) !== i)) problems.push(`plans: the stripePriceId ${id} is used twice`);
  return problems;
}

/** What the schema cannot say of the coupons: codes are unique (in any case), one kind of discount each, plans that exist. */
function couponProblems(config: Pick<Config, 'plans' | 'coupons'>): string[] {
  const problems: string[] = [];
  const codes = config.coupons.map((c) => c.code.toLowerCase());
  const slugs = new Set(config.plans.map((p) => p.slug));
  config.coupons.forEach((c, i) => {
    if (codes.indexOf(codes[i]!) !== i) problems.push(`coupons: the code ${c.code} is used twice (codes are matched in any case)`);
    if ((c.percentOff === undefined) === (c.amountOff === undefined)) problems.push(`coupons: ${c.code} needs exactly one of percentOff and amountOff`);
    if ((c.amountOff === undefined) !== (c.currency === undefined)) problems.push(`coupons: ${c.code} gives currency with amountOff, and only then`);
    for (const slug of c.plans ?? []) if (!slugs.has(slug)) problems.push(`coupons: ${c.code} names the plan ${slug}, which is not one of plans`);
  });
  return problems;
}

/** clamd is reached one way: its socket or its host. */
function scanningProblems(config: Pick<Config, 'scanning'>): string[] {
  const { clamdSocket, clamdHost } = config.scanning;
  return clamdSocket && clamdHost ? ['scanning: give clamdSocket (TICKETD_CLAMD_SOCKET) or clamdHost (TICKETD_CLAMD_HOST), not both'] : [];
}

/** The API keeps at least one connection of dbPoolMax when the dispatcher takes its share. */
function poolProblems(config: Pick<Config, 'dbPoolMax' | 'dispatcherDbPoolMax'>): string[] {
  const share = config.dispatcherDbPoolMax;
  if (share === null || share === 0 || share < config.dbPoolMax) return [];
  return [
    `dispatcherDbPoolMax (TICKETD_DISPATCHER_DB_POOL_MAX): ${share} leaves the API none of dbPoolMax (${config.dbPoolMax}); at most ${config.dbPoolMax - 1}, or 0 for one shared pool`,
  ];
}

/**
 * In a process that runs the API and the dispatcher (role all), the connections of dbPoolMax the
 * dispatcher gets in a pool of its own, the API keeping the rest: a busy API then cannot queue
 * the dispatcher's claims and settles behind its own requests. Default a quarter, at least 2, the
 * API keeping one or more; 0 (configured, or a dbPoolMax of 1): one pool shared by both.
 */
export function dispatcherPoolShare(config: Pick<Config, 'dbPoolMax' | 'dispatcherDbPoolMax'>): number {
  if (config.dispatcherDbPoolMax !== null) return config.dispatcherDbPoolMax;
  if (config.dbPoolMax < 2) return 0;
  return Math.min(config.dbPoolMax - 1, Math.max(2, Math.ceil(config.dbPoolMax / 4)));
}

/** Whether the person with this email runs the installation (instanceAdmins, matched in any case). */
export function isInstanceAdmin(config: Pick<Config, 'instanceAdmins'>, email: string): boolean {
  const wanted = email.trim().toLowerCase();
  return config.instanceAdmins.some((e) => e.trim().toLowerCase() === wanted);
}

const SANE_HOST = /^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/;

/**
 * The absolute base of links a response hands out (signed attachment URLs, avatar URLs): the
 * configured public URL, else the protocol and host the request came in on (a host that is not a
 * plain name or address reads as localhost).
 */
export function requestBaseUrl(publicUrl: string | null, protocol: string, host: string): string {
  if (publicUrl) return publicUrl.replace(/\/+$/, '');
  const scheme = protocol === 'https' ? 'https' : 'http';
  const authority = (SANE_HOST.test(host) ? host : 'localhost').replace(scheme === 'https' ? /:443$/ : /:80$/, '');
  return `${scheme}://${authority}`;
}

export function publicBaseUrl(config: Config, port = config.port): string {
  if (config.publicUrl) return config.publicUrl.replace(/\/$/, '');
  return listenUrl(config.host, port);
}

/** The URL of a server listening on host:port, as a client on this machine reaches it (any address: localhost). */
export function listenUrl(host: string, port: number): string {
  const name = host === '0.0.0.0' || host === '::' ? 'localhost' : host;
  return `http://${name.includes(':') ? `[${name}]` : name}:${port}`;
}
