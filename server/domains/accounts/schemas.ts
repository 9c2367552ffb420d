import { Type, type Static } from 'typebox';
import { Nullable, Timestamp } from '../../core/schemas.js';
import { ApiKeyWithSecret } from '../api-keys/schemas.js';
import { BrandOut } from '../brands/schemas.js';
import { MemberOut } from '../members/schemas.js';

export const AccountOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('account'),
  name: Type.String(),
  livemode: Type.Boolean({ description: 'The mode of the credential that read it' }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const CreateAccountBody = Type.Object(
  {
    email: Type.String({ format: 'email', maxLength: 320, description: "The owner's email" }),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "The owner's name" })),
    accountName: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Defaults to the owner name or email' })),
  },
  { additionalProperties: false },
);

export const CreatedAccount = Type.Object({
  account: Type.Omit(AccountOut, ['livemode']),
  owner: MemberOut,
  apiKeys: Type.Object({ live: ApiKeyWithSecret, test: ApiKeyWithSecret }),
  brand: Type.Optional(BrandOut),
});

export const UsageOut = Type.Object({
  ticketsThisMonth: Type.Integer({ description: 'Tickets created since the first of this month (UTC), in the brands and mode the caller sees: live, not spam, not deleted' }),
  ticketsTotal: Type.Integer({ description: 'The same tickets, all told' }),
  brandsCount: Type.Integer({ description: 'Brands the caller sees, in its mode' }),
  plan: Type.Object({
    name: Type.String({ description: "The account's plan" }),
    ticketLimit: Nullable(Type.Integer({ description: 'Tickets per billing period (GET /v1/auth/usage counts them); null = unlimited' })),
    brandLimit: Nullable(Type.Integer({ description: 'null = unlimited' })),
  }),
});

export type CreateAccountInput = Static<typeof CreateAccountBody>;
export type CreatedAccountView = Static<typeof CreatedAccount>;
export type AccountView = Static<typeof AccountOut>;
export type UsageView = Static<typeof UsageOut>;
