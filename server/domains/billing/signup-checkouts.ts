import type { BaseCtx } from '../../core/context.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { hashSecret, randomBase62, TOKEN_RANDOM_LENGTH } from '../../core/secrets.js';
import { normalizeEmail } from '../../core/text.js';
import { SignupCheckout } from './model.js';

/**
 * Paid sign-ups under way (POST /v1/auth/checkout): a checkout before its account exists, so of
 * no tenant. Found by its page's token (local provider) or the provider's checkout id, locked in
 * a transaction; completed once into the account it made, or refused once.
 */

const TOKEN_PREFIX = 'su_';
const TOKEN_FORMAT = new RegExp(`^${TOKEN_PREFIX}[0-9A-Za-z]{${TOKEN_RANDOM_LENGTH}}$`);
/** Stripe's own default for a Checkout Session; the local page keeps the same. */
export const SIGNUP_CHECKOUT_TTL_MS = 24 * 3_600_000;

export interface SignupCheckoutInput {
  email: string;
  accountName: string | null;
  planSlug: string;
  couponCode: string | null;
  successUrl: string;
  cancelUrl: string;
}

/** A local checkout (in a transaction); its page's token is returned here only. */
export async function createLocal(tx: BaseCtx, input: SignupCheckoutInput): Promise<{ checkout: SignupCheckout; token: string }> {
  const token = `${TOKEN_PREFIX}${randomBase62()}`;
  const now = new Date(tx.services.now());
  const checkout = await SignupCheckout.query(tx.db)
    .insert({
      id: newId(ID_PREFIX.signupCheckout),
      provider: 'local',
      tokenHash: hashSecret(token),
      providerRef: null,
      ...input,
      email: normalizeEmail(input.email),
      createdAt: now,
      expiresAt: new Date(now.getTime() + SIGNUP_CHECKOUT_TTL_MS),
    })
    .returning('*');
  return { checkout, token };
}

/** Records a checkout made at the provider under the id chosen before asking it. */
export async function recordProvider(tx: BaseCtx, input: SignupCheckoutInput & { id: string; provider: string; providerRef: string; expiresAt: Date }): Promise<SignupCheckout> {
  await tx
    .db('signupCheckouts')
    .insert({ ...input, email: normalizeEmail(input.email), tokenHash: null, createdAt: new Date(tx.services.now()) })
    .onConflict(tx.db.raw('(provider, provider_ref) where provider_ref is not null'))
    .ignore();
  return (await byProviderRef(tx, input.provider, input.providerRef))!;
}

/** A checkout by its page's token, locked in a transaction; null when unknown. */
export async function byToken(ctx: BaseCtx, token: string): Promise<SignupCheckout | null> {
  if (!TOKEN_FORMAT.test(token)) return null;
  const q = SignupCheckout.query(ctx.db).where('tokenHash', hashSecret(token)).first();
  if (ctx.db.isTransaction) q.forUpdate();
  return (await q) ?? null;
}

/** A checkout by the provider's id, locked in a transaction; null when ticketd made none such. */
export async function byProviderRef(ctx: BaseCtx, provider: string, ref: string): Promise<SignupCheckout | null> {
  const q = SignupCheckout.query(ctx.db).where({ provider, providerRef: ref }).first();
  if (ctx.db.isTransaction) q.forUpdate();
  return (await q) ?? null;
}

export async function markCompleted(tx: BaseCtx, id: string, accountId: string): Promise<void> {
  await tx
    .db('signupCheckouts')
    .where({ id })
    .update({ completedAt: new Date(tx.services.now()), completedAccountId: accountId });
}

export async function markFailed(tx: BaseCtx, id: string, failure: string): Promise<void> {
  await tx
    .db('signupCheckouts')
    .where({ id })
    .update({ failedAt: new Date(tx.services.now()), failure });
}

/**
 * How long a checkout is kept after it expired: long enough for a late provider notification and
 * an operator's question; then its address goes (completed or not, the account holds what it made).
 */
export const SIGNUP_CHECKOUT_KEPT_MS = 30 * 24 * 3_600_000;
const PURGE_BATCH = 1_000;

/** Deletes a batch of the checkouts that expired more than SIGNUP_CHECKOUT_KEPT_MS ago; returns how many. */
export async function purgeExpired(base: BaseCtx, now: number): Promise<number> {
  const result = (await base.db.raw(
    `delete from signup_checkouts where id in (
       select id from signup_checkouts where expires_at <= ? order by expires_at limit ? for update skip locked)`,
    [new Date(now - SIGNUP_CHECKOUT_KEPT_MS), PURGE_BATCH],
  )) as { rowCount: number };
  return result.rowCount;
}
