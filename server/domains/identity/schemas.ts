import { Type, type Static } from 'typebox';

export const ProviderParams = Type.Object({ provider: Type.String({ minLength: 1, maxLength: 64, description: 'The provider as configured in identityProviders' }) });

const Name = Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()]));

/** A notification as the provider sends it (Clerk's shape: `type`, and the user in `data`); what ticketd reads of the user, the rest passed over. */
export const Notification = Type.Object({
  type: Type.String({ minLength: 1, maxLength: 100 }),
  data: Type.Object(
    {
      id: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
      first_name: Name,
      last_name: Name,
      primary_email_address_id: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()])),
      email_addresses: Type.Optional(
        Type.Array(Type.Object({ id: Type.Optional(Type.String({ maxLength: 200 })), email_address: Type.String({ maxLength: 320 }) }), { maxItems: 100 }),
      ),
    },
    { additionalProperties: true },
  ),
});
export type NotificationInput = Static<typeof Notification>;

export const NotificationResult = Type.Object({
  received: Type.Literal(true),
  action: Type.Union([Type.Literal('updated'), Type.Literal('sessions_revoked'), Type.Literal('ignored'), Type.Literal('duplicate')]),
  members: Type.Integer({ description: 'Memberships changed' }),
});
export type NotificationResultView = Static<typeof NotificationResult>;
