import type { Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import { notFound } from '../../server/core/errors.js';
import { withServices } from '../database.js';
import { adminCtx } from '../context.js';
import { emit, table, UsageError } from '../io.js';
import type { GlobalOptions } from '../globals.js';

const limit = (n: number | null) => (n === null ? 'unlimited' : String(n));

export function registerPlans(program: Command, globals: () => GlobalOptions): void {
  program
    .command('plans')
    .description('the plans on sale (from the configuration)')
    .command('list')
    .description('list the plans, cheapest first; the default plan is marked')
    .option('--json', 'JSON output')
    .action(async (opts: { json?: boolean }) => {
      const config = loadConfig({ configFile: globals().config });
      const billing = await import('../../server/domains/billing/service.js');
      const plans = [...config.plans].sort((a, b) => a.price - b.price).map((p) => ({ ...billing.planView(p), default: p.slug === config.defaultPlan }));
      emit(Boolean(opts.json), plans, () =>
        table(
          [...config.plans]
            .sort((a, b) => a.price - b.price)
            .map((p) => ({
              slug: `${p.slug}${p.slug === config.defaultPlan ? ' (default)' : ''}`,
              name: p.name,
              price: `${(p.price / 100).toFixed(2)} ${p.currency}/${p.interval}`,
              tickets: limit(p.ticketsPerPeriod),
              brands: limit(p.brands),
              members: limit(p.members),
            })),
          ['slug', 'name', 'price', 'tickets', 'brands', 'members'],
        ),
      );
    });
}

/** `ticketd accounts plan ACCOUNT PLAN`: the operator's override, over any subscription. */
export function registerAccountPlan(accounts: Command, globals: () => GlobalOptions): void {
  accounts
    .command('plan')
    .description("put an account on a plan, whatever it subscribes to (an operator's override); PLAN 'none' removes the override")
    .argument('<account>', 'account id')
    .argument('<plan>', "plan slug (see `ticketd plans list`), or 'none'")
    .option('--json', 'JSON output')
    .action(async (accountId: string, planSlug: string, opts: { json?: boolean }) => {
      const config = loadConfig({ configFile: globals().config });
      const billing = await import('../../server/domains/billing/service.js');
      const plan = planSlug === 'none' ? null : billing.findPlan(config, planSlug);
      if (planSlug !== 'none' && !plan) throw new UsageError(`there is no plan ${planSlug}: plans are ${config.plans.map((p) => p.slug).join(', ')}`);
      const found = await withServices(config, (services) => billing.setAccountPlan(adminCtx(services), accountId, plan?.slug ?? null), { migrate: true });
      if (!found) throw notFound(`Account ${accountId}`);
      const result = { accountId, plan: plan ? billing.planView(plan) : null };
      emit(Boolean(opts.json), result, () => [plan ? `account ${accountId} is on the ${plan.name} plan (${plan.slug})` : `account ${accountId} has no plan override`]);
    });
}
