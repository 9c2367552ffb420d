import { Type, type Static } from 'typebox';
import { BrandParams, Nullable, Timestamp } from '../../core/schemas.js';
import { WEBHOOK_EVENTS, type WebhookEvent } from '../../core/outbox/events.js';

export const MIN_SECRET_LENGTH = 16;
export const DELIVERY_LIST_LIMIT_DEFAULT = 50;

const EventName = Type.Unsafe<WebhookEvent>({ type: 'string', enum: [...WEBHOOK_EVENTS] });
const Events = Type.Array(EventName, {
  minItems: 1,
  maxItems: WEBHOOK_EVENTS.length * 2,
  description: 'Events to receive; each delivery is named as subscribed (`ticket.comment.created` and `comment.created` name the same event)',
});
const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  description: 'Absolute http(s) URL without credentials; hosts that are or resolve to non-public addresses are refused unless the operator allows them',
});
const Secret = Type.String({
  minLength: MIN_SECRET_LENGTH,
  maxLength: 256,
  pattern: '^[\\x21-\\x7e]+$',
  description: `Signing secret (${MIN_SECRET_LENGTH}-256 printable ASCII characters, no spaces). Omit it to get a generated \`whsec_…\` secret, returned once.`,
});
const Enabled = Type.Boolean({ description: 'Deliveries are sent only while enabled' });
const Active = Type.Boolean({ description: "The dashboard's name for `enabled`" });

const webhookFields = {
  id: Type.String(),
  object: Type.Literal('webhook'),
  brandId: Type.String(),
  url: Type.String(),
  events: Type.Array(Type.String()),
  enabled: Type.Boolean(),
  failureCount: Type.Integer({ description: 'Consecutive failed delivery attempts; 0 after a success' }),
  lastTriggered: Nullable(Timestamp),
  lastFailure: Nullable(Type.String({ description: 'Why the last failed attempt failed' })),
  lastFailureAt: Nullable(Timestamp),
  disabledReason: Nullable(Type.String({ description: 'Why ticketd disabled the webhook (410 Gone, or every attempt failing for about three days)' })),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  // The dashboard's snake_case spelling of the same record.
  brand_id: Type.String(),
  active: Type.Boolean(),
  created_at: Timestamp,
  updated_at: Timestamp,
};

export const WebhookOut = Type.Object(webhookFields);
export const WebhookWithSecretOut = Type.Object({ ...webhookFields, secret: Type.String({ description: 'The signing secret: shown only now' }) });

export const WebhookParams = Type.Object({
  ...BrandParams.properties,
  webhookId: Type.String({ minLength: 1, maxLength: 64, description: 'Webhook id (`wh_…`)' }),
});
export const DeliveryParams = Type.Object({
  ...WebhookParams.properties,
  deliveryId: Type.String({ minLength: 1, maxLength: 64, description: 'Delivery id (`dlv_…`), also the `webhook-id` header receivers saw' }),
});

export const CreateWebhookBody = Type.Object(
  { url: Url, secret: Type.Optional(Secret), events: Events, enabled: Type.Optional(Enabled), active: Type.Optional(Active) },
  { additionalProperties: false },
);

export const UpdateWebhookBody = Type.Object(
  { url: Type.Optional(Url), events: Type.Optional(Events), enabled: Type.Optional(Enabled), active: Type.Optional(Active) },
  { additionalProperties: false, minProperties: 1 },
);

export const RotateSecretBody = Type.Object(
  {
    graceMinutes: Type.Optional(
      Type.Integer({ minimum: 0, maximum: 10_080, description: 'Minutes the old secret keeps signing too (a second `v1,` signature in webhook-signature); default 0' }),
    ),
  },
  { additionalProperties: false },
);

export const DeliveryListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: DELIVERY_LIST_LIMIT_DEFAULT })),
  },
  { additionalProperties: false },
);

export const DeliveryOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('webhook_delivery'),
  webhookId: Type.String(),
  event: Type.String(),
  payload: Type.Record(Type.String(), Type.Unknown(), { description: 'The body sent, as JSON' }),
  status: Type.Unsafe<string>({ type: 'string', enum: ['PENDING', 'RETRYING', 'SUCCESS', 'FAILED'], description: "The contract's status; a dead-lettered delivery is FAILED" }),
  state: Type.Unsafe<string>({
    type: 'string',
    enum: ['pending', 'retrying', 'success', 'failed', 'dead'],
    description: 'The precise state: `failed` = not retried (4xx, redirect, refused address), `dead` = every attempt failed',
  }),
  attempts: Type.Integer(),
  lastAttempt: Nullable(Timestamp),
  nextAttempt: Nullable(Timestamp),
  responseCode: Nullable(Type.Integer()),
  responseBody: Nullable(Type.String({ description: 'The first 4 KiB of the last response' })),
  error: Nullable(Type.String()),
  createdAt: Timestamp,
  deliveredAt: Nullable(Timestamp),
});

export type WebhookView = Static<typeof WebhookOut>;
export type WebhookWithSecretView = Static<typeof WebhookWithSecretOut>;
export type DeliveryView = Static<typeof DeliveryOut>;
export type CreateWebhookInput = Static<typeof CreateWebhookBody>;
export type UpdateWebhookInput = Static<typeof UpdateWebhookBody>;
export type RotateSecretInput = Static<typeof RotateSecretBody>;
export type DeliveryListInput = Static<typeof DeliveryListQuery>;
