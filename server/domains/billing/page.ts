import type { PlanConfig } from '../../core/config.js';
import { htmlDocument } from '../../core/page.js';
import { escapeHtml } from '../../core/text.js';

/** The local provider's checkout page: the plan, Confirm (posts back), Cancel (back to the dashboard). No script. */

const money = (minor: number, currency: string) => `${(minor / 100).toFixed(2)} ${currency.toUpperCase()}`;

function price(plan: PlanConfig, coupon: { code: string; amountOff: number } | null): string {
  if (plan.price === 0) return 'free';
  const full = `${money(plan.price, plan.currency)} a ${plan.interval}`;
  return coupon ? `${full}; with the coupon ${coupon.code}, ${money(plan.price - coupon.amountOff, plan.currency)} for the first ${plan.interval}` : full;
}

export function checkoutPage(
  page: { plan: PlanConfig; coupon: { code: string; amountOff: number } | null; cancelUrl: string; completed: boolean; successUrl: string },
  action: string,
): string {
  const body = page.completed
    ? `<h1>Done</h1><p>The ${escapeHtml(page.plan.name)} plan is confirmed.</p><p><a href="${escapeHtml(page.successUrl)}">Back to the dashboard</a></p>`
    : `<h1>Confirm the ${escapeHtml(page.plan.name)} plan</h1><p>${escapeHtml(price(page.plan, page.coupon))}. Nothing is charged to a card: this server bills locally.</p>
<form method="post" action="${escapeHtml(action)}"><button type="submit">Confirm</button> <a href="${escapeHtml(page.cancelUrl)}">Cancel</a></form>`;
  return htmlDocument('Checkout', body);
}

/** The local provider's page of a paid sign-up: the plan and the address the organization is made for. */
export function signupCheckoutPage(
  page: { plan: PlanConfig; email: string; coupon: { code: string; amountOff: number } | null; cancelUrl: string; completed: boolean; successUrl: string },
  action: string,
): string {
  const body = page.completed
    ? `<h1>Done</h1><p>The organization is made on the ${escapeHtml(page.plan.name)} plan; a sign-in link was sent to ${escapeHtml(page.email)}.</p><p><a href="${escapeHtml(page.successUrl)}">Continue</a></p>`
    : `<h1>Sign up for the ${escapeHtml(page.plan.name)} plan</h1><p>For ${escapeHtml(page.email)}: ${escapeHtml(price(page.plan, page.coupon))}. Nothing is charged to a card: this server bills locally.</p>
<form method="post" action="${escapeHtml(action)}"><button type="submit">Confirm</button> <a href="${escapeHtml(page.cancelUrl)}">Cancel</a></form>`;
  return htmlDocument('Checkout', body);
}
