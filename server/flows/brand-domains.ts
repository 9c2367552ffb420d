import type { Brand } from '../core/brand.js';
import type { TenantCtx } from '../core/context.js';
import { HttpError } from '../core/errors.js';
import * as billing from '../domains/billing/service.js';
import * as brandDomains from '../domains/brand-domains/service.js';
import type { BrandDomainView, CreateDomainInput } from '../domains/brand-domains/schemas.js';
import type { BrandInfo } from '../domains/mail/messages.js';
import * as mail from '../domains/mail/service.js';

/** A brand's own domain, where the account's plan includes custom domains (403 plan_feature_unavailable otherwise). */
export async function createDomain(ctx: TenantCtx, brandId: string, input: CreateDomainInput): Promise<BrandDomainView> {
  const plan = await billing.effectivePlan(ctx, await billing.current(ctx));
  if (!plan.customDomain) {
    throw new HttpError(403, 'plan_feature_unavailable', `The ${plan.name} plan does not include custom domains: upgrade the plan (GET /v1/auth/plans) to add one`);
  }
  return brandDomains.create(ctx, brandId, input);
}

/** The brand as its mail presents it, with the domain its mail goes out from (its verified primary OUTBOUND one), if any. */
export async function mailingBrand(tx: TenantCtx, brand: Brand): Promise<BrandInfo> {
  return mail.brandInfo(brand, await brandDomains.sendingDomain(tx, brand.id));
}
