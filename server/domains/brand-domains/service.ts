import { generateKeyPair } from 'node:crypto';
import { promisify } from 'node:util';
import type { BaseCtx, TenantCtx } from '../../core/context.js';
import { tenantCtx, withTx } from '../../core/context.js';
import type { Config } from '../../core/config.js';
import type { Change } from '../../core/audit.js';
import * as audit from '../../core/audit.js';
import { lockBrand, requireBrand } from '../../core/brand.js';
import { isPgError, PG } from '../../core/db.js';
import { badRequest, conflict, notFound } from '../../core/errors.js';
import { ID_PREFIX, newId, normalizeBrandId } from '../../core/ids.js';
import { scopeOf } from '../../core/model.js';
import { keyringPart, type SealContext, type SealedColumn } from '../../core/sealed.js';
import { dnsPart, DnsUnavailable, type DnsLookup } from '../../integrations/dns.js';
import { BrandDomain, type DomainType, type RecordStatus } from './model.js';
import type { BrandDomainView, CreateDomainInput, DnsRecordView, UpdateDomainInput, VerifyView } from './schemas.js';

/**
 * A brand's own mail domains (see the brand_domains migration): the DNS records each needs, their
 * verification, and the DKIM key of an OUTBOUND one. Lookups are network I/O, so verify reads the
 * row, asks DNS outside any transaction, and then records the outcome in a short one.
 */

/** The name bounces come back to: `bounces.<domain>`, an alias of the inbound domain. */
export const RETURN_PATH_LABEL = 'bounces';
/** A verified domain is checked again this long after its last check; one whose records went away stops being used. */
export const RECHECK_AFTER_MS = 24 * 60 * 60_000;
/** A scheduled check DNS could not answer is made again this much later. */
const DNS_RETRY_MS = 60 * 60_000;

export const SEALED_SECRETS: readonly SealedColumn[] = [{ table: 'brand_domains', column: 'dkim_private_key', purpose: 'brand_domain.dkim_private_key' }];
const DKIM_SEAL = (accountId: string): SealContext => ({ purpose: SEALED_SECRETS[0]!.purpose, accountId });

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
const bareName = (name: string) => name.trim().toLowerCase().replace(/\.$/, '');

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
/** Letters, or an internationalized name in its xn-- form: never digits alone, so an IPv4 address is refused. */
const TOP_LEVEL = /^([a-z]{2,63}|xn--[a-z0-9-]{1,59})$/;

/** Where an INBOUND domain publishes its ownership record, and what the record says before the domain's id. */
const OWNERSHIP_LABEL = '_ticketd';
const OWNERSHIP_PREFIX = 'ticketd-domain=';

/** A domain name as ticketd keeps it (lower case, no final dot); 400 for anything else, an address included. */
export function normalizeDomain(raw: string): string {
  const domain = bareName(raw);
  const labels = domain.split('.');
  const invalid = (why: string) => badRequest(`domain ${why}`, [{ field: 'domain', message: why }], 'invalid_domain');
  if (/[/:@\s]/.test(domain)) throw invalid('must be a bare domain name such as example.com (no scheme, path, port or address)');
  if (domain.length > 253 || labels.length < 2 || !labels.every((l) => LABEL.test(l))) throw invalid('must be a domain name such as example.com');
  if (!TOP_LEVEL.test(labels.at(-1)!)) throw invalid('must end in a top-level domain such as .com (an address is not a domain)');
  return domain;
}

/** The mechanism customers' SPF records include: the operator's (mailSpfMechanism), else their inbound domain's record. */
export const spfMechanism = (config: Pick<Config, 'mailSpfMechanism' | 'inboundDomain'>) => config.mailSpfMechanism ?? `include:${config.inboundDomain}`;

interface RecordSpec {
  purpose: 'dkim' | 'spf' | 'return_path' | 'dmarc' | 'mx' | 'ownership';
  type: 'TXT' | 'MX' | 'CNAME';
  name: string;
  value: string;
  priority?: number;
  required: boolean;
}

/** The records a domain needs published, in the order the dashboard lists them. */
export function recordsOf(
  row: Pick<BrandDomain, 'id' | 'domain' | 'type' | 'dkimSelector' | 'dkimPublicKey'>,
  config: Pick<Config, 'mailSpfMechanism' | 'inboundDomain'>,
): RecordSpec[] {
  if (row.type === 'INBOUND') {
    return [
      { purpose: 'mx', type: 'MX', name: row.domain, value: config.inboundDomain, priority: 10, required: true },
      // An MX at ticketd proves nothing (every customer's points there): only the domain's owner can publish the id of this brand's row.
      { purpose: 'ownership', type: 'TXT', name: `${OWNERSHIP_LABEL}.${row.domain}`, value: `${OWNERSHIP_PREFIX}${row.id}`, required: true },
    ];
  }
  return [
    { purpose: 'dkim', type: 'TXT', name: `${row.dkimSelector}._domainkey.${row.domain}`, value: `v=DKIM1; k=rsa; p=${row.dkimPublicKey}`, required: true },
    { purpose: 'spf', type: 'TXT', name: row.domain, value: `v=spf1 ${spfMechanism(config)} ~all`, required: true },
    { purpose: 'return_path', type: 'CNAME', name: `${RETURN_PATH_LABEL}.${row.domain}`, value: config.inboundDomain, required: true },
    { purpose: 'dmarc', type: 'TXT', name: `_dmarc.${row.domain}`, value: `v=DMARC1; p=none; rua=mailto:postmaster@${row.domain}`, required: false },
  ];
}

export function toView(row: BrandDomain, config: Config): BrandDomainView {
  return {
    id: row.id,
    object: 'brand_domain',
    brandId: row.brandId,
    domain: row.domain,
    type: row.type,
    verified: row.verified,
    verifiedAt: iso(row.verifiedAt),
    checkedAt: iso(row.checkedAt),
    resendDomainId: null,
    fromName: row.fromName,
    fromEmail: row.fromEmail,
    replyMode: row.replyMode,
    isPrimary: row.isPrimary,
    records: recordsOf(row, config).map(
      (r): DnsRecordView => ({ ...r, ...(r.priority === undefined ? {} : { priority: r.priority }), status: row.recordStatus[r.purpose] ?? 'pending' }),
    ),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/**
 * The brand's domains, oldest first. The brand was checked before the request got here
 * (core/auth.ts): this is the one read, on the brand's index, even for a brand with none.
 */
export async function list(ctx: TenantCtx, brandId: string): Promise<BrandDomainView[]> {
  const rows = await BrandDomain.scoped(ctx).where('brandId', normalizeBrandId(brandId)).orderBy('id');
  return rows.map((r) => toView(r, ctx.services.config));
}

async function requireDomain(ctx: TenantCtx, brandId: string, domainId: string, lock = false): Promise<BrandDomain> {
  const query = BrandDomain.scoped(ctx).where('brandId', normalizeBrandId(brandId)).findById(domainId);
  const row = await (lock ? query.forUpdate() : query);
  if (!row) throw notFound('Domain');
  return row;
}

export async function get(ctx: TenantCtx, brandId: string, domainId: string): Promise<BrandDomainView> {
  await requireBrand(ctx, brandId);
  return toView(await requireDomain(ctx, brandId, domainId), ctx.services.config);
}

const generateRsaKeyPair = promisify(generateKeyPair);

/** A DKIM key: the PEM private key, and the public key as its TXT record carries it. */
async function dkimKey(): Promise<{ privateKey: string; publicKey: string }> {
  const { privateKey, publicKey } = await generateRsaKeyPair('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'der' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { privateKey, publicKey: publicKey.toString('base64') };
}

/** Selectors differ per key, so a domain on two brands (or two ticketd installations) keeps both keys. */
const newSelector = (id: string) => `td${id.slice(-8).toLowerCase()}`;

/** A new domain with its records; the first OUTBOUND domain of the brand is its primary. The key is made before the transaction (CPU, not locks). */
export async function create(ctx: TenantCtx, brandId: string, input: CreateDomainInput): Promise<BrandDomainView> {
  const domain = normalizeDomain(input.domain);
  const type: DomainType = input.type ?? 'OUTBOUND';
  if (domain === bareName(ctx.services.config.inboundDomain))
    throw badRequest(`domain ${domain} is this server's own inbound domain`, [{ field: 'domain', message: 'is the server’s inbound domain' }], 'invalid_domain');
  const id = newId(ID_PREFIX.brandDomain);
  const key = type === 'OUTBOUND' ? await dkimKey() : null;
  const sealedKey = key ? await ctx.services.get(keyringPart).seal(key.privateKey, DKIM_SEAL(ctx.accountId)) : null;
  return withTx(ctx, async (tx) => {
    const brand = await lockBrand(tx, brandId);
    const hasPrimary = type === 'OUTBOUND' && (await BrandDomain.scoped(tx).where({ brandId: brand, isPrimary: true }).select('id').first());
    let row: BrandDomain;
    try {
      row = (await BrandDomain.query(tx.db)
        .insert({
          id,
          ...scopeOf(tx),
          brandId: brand,
          domain,
          type,
          isPrimary: type === 'OUTBOUND' && !hasPrimary,
          dkimSelector: key ? newSelector(id) : null,
          dkimPublicKey: key?.publicKey ?? null,
          dkimPrivateKey: sealedKey,
        })
        .returning('*')) as unknown as BrandDomain;
    } catch (err) {
      if (isPgError(err, PG.uniqueViolation, 'brand_domains_domain_unique')) throw conflict(`${domain} is already an ${type} domain of this brand`, 'domain_exists');
      throw err;
    }
    await audit.record(tx, { brandId: brand, entityType: 'brand_domain', entityId: row.id, event: 'brand_domain.created', metadata: { domain, type } });
    return toView(row, tx.services.config);
  });
}

export async function update(ctx: TenantCtx, brandId: string, domainId: string, input: UpdateDomainInput): Promise<BrandDomainView> {
  return withTx(ctx, async (tx) => {
    const brand = await lockBrand(tx, brandId);
    const current = await requireDomain(tx, brand, domainId, true);
    if (current.type === 'INBOUND')
      throw badRequest('An INBOUND domain sends nothing: fromName, fromEmail, replyMode and isPrimary are for OUTBOUND domains', undefined, 'inbound_domain');
    const patch: Partial<Pick<BrandDomain, 'fromName' | 'fromEmail' | 'replyMode' | 'isPrimary'>> = {};
    if (input.fromName !== undefined) patch.fromName = input.fromName?.trim() || null;
    if (input.fromEmail !== undefined) {
      const email = input.fromEmail?.trim().toLowerCase() || null;
      if (email && !email.endsWith(`@${current.domain}`))
        throw badRequest(`fromEmail must be an address at ${current.domain}`, [{ field: 'fromEmail', message: `must end with @${current.domain}` }], 'from_email_outside_domain');
      patch.fromEmail = email;
    }
    if (input.replyMode !== undefined) patch.replyMode = input.replyMode;
    if (input.isPrimary !== undefined && input.isPrimary !== current.isPrimary) {
      patch.isPrimary = input.isPrimary;
      if (input.isPrimary)
        await BrandDomain.scoped(tx)
          .where({ brandId: brand, isPrimary: true })
          .patch({ isPrimary: false, updatedAt: new Date(ctx.services.now()) });
    }
    const changes: Change[] = Object.entries(patch)
      .filter(([k, v]) => current[k as keyof typeof patch] !== v)
      .map(([field, to]) => ({ field, from: current[field as keyof typeof patch], to }));
    if (!changes.length) return toView(current, tx.services.config);
    const row = (await BrandDomain.scoped(tx)
      .where({ brandId: brand, id: current.id })
      .patch({ ...patch, updatedAt: new Date(ctx.services.now()) })
      .returning('*')
      .first()) as unknown as BrandDomain;
    await audit.record(tx, { brandId: brand, entityType: 'brand_domain', entityId: row.id, event: 'brand_domain.updated', changes, metadata: { domain: row.domain } });
    return toView(row, tx.services.config);
  });
}

/** Deletes it; when it was the primary, the oldest other OUTBOUND domain (a verified one first) becomes primary. */
export async function remove(ctx: TenantCtx, brandId: string, domainId: string): Promise<BrandDomainView> {
  return withTx(ctx, async (tx) => {
    const brand = await lockBrand(tx, brandId);
    const row = await requireDomain(tx, brand, domainId, true);
    await BrandDomain.scoped(tx).where({ brandId: brand, id: row.id }).delete();
    if (row.isPrimary) {
      const next = await BrandDomain.scoped(tx)
        .where({ brandId: brand, type: 'OUTBOUND' })
        .orderBy([{ column: 'verified', order: 'desc' }, { column: 'id' }])
        .select('id')
        .first();
      if (next)
        await BrandDomain.scoped(tx)
          .where({ brandId: brand, id: next.id })
          .patch({ isPrimary: true, updatedAt: new Date(ctx.services.now()) });
    }
    await audit.record(tx, { brandId: brand, entityType: 'brand_domain', entityId: row.id, event: 'brand_domain.deleted', metadata: { domain: row.domain, type: row.type } });
    return toView(row, tx.services.config);
  });
}

interface CheckOutcome {
  status: Record<string, RecordStatus>;
  verified: boolean;
  /** What is missing, record by record; null when every required record was found. */
  error: string | null;
}

const squeeze = (s: string) => s.replace(/\s+/g, '').toLowerCase();

/** Whether the published answers hold the record: TXT by its defining part, MX and CNAME by their target. */
async function published(dns: DnsLookup, record: RecordSpec): Promise<boolean> {
  switch (record.purpose) {
    case 'dkim':
      return (await dns.txt(record.name)).some((txt) => squeeze(txt).includes(squeeze(record.value.split('p=')[1]!)));
    case 'spf': {
      const mechanism = record.value.split(' ')[1]!.toLowerCase();
      return (await dns.txt(record.name)).some((txt) => /^v=spf1(\s|$)/i.test(txt) && txt.toLowerCase().split(/\s+/).includes(mechanism));
    }
    case 'dmarc':
      return (await dns.txt(record.name)).some((txt) => /^v=DMARC1\s*(;|$)/i.test(txt));
    case 'return_path':
      return (await dns.cname(record.name)).some((name) => bareName(name) === bareName(record.value));
    case 'mx':
      return (await dns.mx(record.name)).some((mx) => bareName(mx.exchange) === bareName(record.value));
    case 'ownership':
      return (await dns.txt(record.name)).some((txt) => txt.trim() === record.value);
  }
}

/** Looks every record up; throws DnsUnavailable when DNS could not answer (the last outcome then stands). */
async function check(dns: DnsLookup, row: BrandDomain, config: Config): Promise<CheckOutcome> {
  const records = recordsOf(row, config);
  const found = await Promise.all(records.map((r) => published(dns, r)));
  const status = Object.fromEntries(records.map((r, i) => [r.purpose, found[i] ? 'verified' : 'failed'] as const));
  const missing = records
    .filter((r, i) => r.required && !found[i])
    .map((r) => `the ${r.type} record ${r.name} (${r.purpose.replace('_', ' ')}) ${r.type === 'TXT' ? 'is missing or different' : `does not point at ${r.value}`}`);
  return { status, verified: !missing.length, error: missing.length ? `Not verified: ${missing.join('; ')}` : null };
}

/** Records a check's outcome, with an audit entry when the domain became or stopped being verified. */
async function recordCheck(ctx: TenantCtx, row: BrandDomain, outcome: CheckOutcome): Promise<void> {
  await withTx(ctx, async (tx) => {
    const now = new Date(tx.services.now());
    const updated = await BrandDomain.scoped(tx)
      .where({ brandId: row.brandId, id: row.id })
      .patch({
        verified: outcome.verified,
        verifiedAt: outcome.verified ? (row.verified ? row.verifiedAt : now) : null,
        checkedAt: now,
        checkError: outcome.error,
        recordStatus: outcome.status,
      });
    if (!updated || row.verified === outcome.verified) return;
    await audit.record(tx, {
      brandId: row.brandId,
      entityType: 'brand_domain',
      entityId: row.id,
      event: outcome.verified ? 'brand_domain.verified' : 'brand_domain.unverified',
      metadata: { domain: row.domain, ...(outcome.error ? { error: outcome.error } : {}) },
    });
  });
}

/** Checks the domain's records now: `{ verified }`, or `{ verified: false, error }` saying what is missing or that DNS could not answer. */
export async function verify(ctx: TenantCtx, brandId: string, domainId: string): Promise<VerifyView> {
  await requireBrand(ctx, brandId);
  const row = await requireDomain(ctx, brandId, domainId);
  let outcome: CheckOutcome;
  try {
    outcome = await check(ctx.services.get(dnsPart), row, ctx.services.config);
  } catch (err) {
    if (err instanceof DnsUnavailable) return { verified: false, error: `DNS could not answer: ${err.message}; try again shortly` };
    throw err;
  }
  await recordCheck(ctx, row, outcome);
  return outcome.error ? { verified: false, error: outcome.error } : { verified: true };
}

/**
 * The scheduled check: verified domains checked longest ago (at least RECHECK_AFTER_MS), over every
 * account, `limit` at a time. A domain whose records went away stops being verified (and used); one
 * DNS could not answer for keeps its state until the next time. Returns how many stopped.
 */
export async function recheckDue(base: BaseCtx, limit = 20): Promise<{ checked: number; unverified: number }> {
  const due = await BrandDomain.query(base.db)
    .where('verified', true)
    .where('checkedAt', '<', new Date(base.services.now() - RECHECK_AFTER_MS))
    .orderBy('checkedAt')
    .limit(limit);
  const dns = base.services.get(dnsPart);
  let unverified = 0;
  let checked = 0;
  for (const row of due) {
    const ctx = tenantCtx(base, row.accountId, row.livemode);
    try {
      const outcome = await check(dns, row, base.services.config);
      await recordCheck(ctx, row, outcome);
      checked++;
      if (!outcome.verified) unverified++;
    } catch (err) {
      if (!(err instanceof DnsUnavailable)) throw err;
      // Its state stands; asked again in an hour rather than at every tick.
      await BrandDomain.scoped(ctx)
        .where({ brandId: row.brandId, id: row.id })
        .patch({ checkedAt: new Date(base.services.now() - RECHECK_AFTER_MS + DNS_RETRY_MS) });
    }
  }
  return { checked, unverified };
}

/** The DKIM key of a domain, opened for signing (dispatcher only). */
export async function dkimPrivateKey(ctx: BaseCtx, row: Pick<BrandDomain, 'accountId' | 'dkimPrivateKey'>): Promise<string | null> {
  return row.dkimPrivateKey ? ctx.services.get(keyringPart).open(row.dkimPrivateKey, DKIM_SEAL(row.accountId)) : null;
}

/** The only domain a brand's mail goes out from: its primary OUTBOUND domain, while verified. */
const sending = (ctx: TenantCtx, brandId: string) => BrandDomain.scoped(ctx).where({ brandId, type: 'OUTBOUND', isPrimary: true, verified: true });

/** The domain the brand's mail goes out from now (read when a message is queued), or null: it goes from mailFrom. */
export async function sendingDomain(ctx: TenantCtx, brandId: string): Promise<Pick<BrandDomain, 'id' | 'domain' | 'fromName' | 'fromEmail' | 'replyMode'> | null> {
  return (await sending(ctx, normalizeBrandId(brandId)).select('id', 'domain', 'fromName', 'fromEmail', 'replyMode').first()) ?? null;
}

export interface SigningKey {
  domain: string;
  selector: string;
  /** PEM. */
  privateKey: string;
}

/**
 * The key to sign a message queued to go from domain `domainId`, opened at send time (dispatcher
 * only); null when the domain is no longer the brand's verified primary one (unverified by a
 * check, replaced as primary, deleted): the message then goes from mailFrom, unsigned.
 */
export async function signingKey(ctx: TenantCtx, brandId: string, domainId: string): Promise<SigningKey | null> {
  const row = await sending(ctx, normalizeBrandId(brandId)).findById(domainId);
  const privateKey = row?.dkimSelector ? await dkimPrivateKey(ctx, row) : null;
  return row && privateKey ? { domain: row.domain, selector: row.dkimSelector!, privateKey } : null;
}

/**
 * The brand that receives mail for one of these domains (a verified INBOUND domain), over every
 * account: the first domain of the list that one is verified for, and of two brands verified for
 * the same domain (its owner published both), the one verified first.
 */
export async function inboundBrand(base: BaseCtx, domains: readonly string[]): Promise<{ brandId: string } | null> {
  if (!domains.length) return null;
  const rows = await BrandDomain.query(base.db)
    .whereIn('domain', [...new Set(domains)])
    .where({ type: 'INBOUND', verified: true })
    .orderBy([{ column: 'verifiedAt' }, { column: 'id' }])
    .select('domain', 'brandId');
  for (const domain of domains) {
    const row = rows.find((r) => r.domain === domain);
    if (row) return { brandId: row.brandId };
  }
  return null;
}
