import { systemActor, tenantCtx, withTx, type BaseCtx } from '../core/context.js';
import { badRequest } from '../core/errors.js';
import * as audit from '../core/audit.js';
import * as identity from '../domains/identity/service.js';
import type { NotificationInput, NotificationResultView } from '../domains/identity/schemas.js';
import * as members from '../domains/members/service.js';
import * as sessions from '../domains/sessions/service.js';

/**
 * POST /v1/webhooks/{provider}: the identity provider tells of its users. `user.created` and
 * `user.updated` set the name and address of the member(s) the user is; `user.deleted` ends their
 * sessions. A member is linked to the provider's user by the first notification about a user with
 * the member's address; later ones follow the link, so an address change is applied. Everything a
 * message changes, and its id (a redelivery changes nothing), commit together; each membership
 * changed is audited on its account as the provider's doing.
 */

const UPDATES: ReadonlySet<string> = new Set(['user.created', 'user.updated']);

function userOf(provider: string, data: NotificationInput['data']): members.ProviderUser & { userId: string } {
  if (!data.id) throw badRequest('The notification names no user: data.id is required', [{ field: 'data.id', message: 'is required' }], 'invalid_notification');
  const primary = data.email_addresses?.find((e) => e.id !== undefined && e.id === data.primary_email_address_id) ?? data.email_addresses?.[0];
  const name = [data.first_name, data.last_name].filter((part): part is string => Boolean(part?.trim())).join(' ') || null;
  return { provider, userId: data.id, email: primary?.email_address ?? null, name };
}

export async function receive(base: BaseCtx, provider: string, messageId: string, notification: NotificationInput): Promise<NotificationResultView> {
  const wanted = UPDATES.has(notification.type) || notification.type === 'user.deleted';
  const user = wanted ? userOf(provider, notification.data) : null;
  return withTx({ ...base, actor: systemActor(`identity provider ${provider}`) }, async (tx) => {
    if (!(await identity.firstDelivery(tx, provider, messageId, notification.type))) return { received: true as const, action: 'duplicate' as const, members: 0 };
    if (!user) return { received: true as const, action: 'ignored' as const, members: 0 };
    const memberships = await members.linkedMemberships(tx, notification.type === 'user.deleted' ? { ...user, email: null } : user);
    let changed = 0;
    for (const member of memberships) {
      const ctx = tenantCtx(tx, member.accountId, true);
      if (notification.type === 'user.deleted') {
        const revoked = await sessions.revokeAllOf(ctx, member.id);
        await audit.record(ctx, { brandId: null, entityType: 'member', entityId: member.id, event: 'member.sessions_revoked', metadata: { provider, sessions: revoked } });
        changed++;
        continue;
      }
      const changes = await members.applyProviderUser(tx, member, user);
      if (!changes.length) continue;
      await audit.record(ctx, { brandId: null, entityType: 'member', entityId: member.id, event: 'member.updated', changes, metadata: { provider } });
      changed++;
    }
    return { received: true as const, action: notification.type === 'user.deleted' ? ('sessions_revoked' as const) : ('updated' as const), members: changed };
  });
}
