import { Type, type Static } from 'typebox';
import { EmailAddress, Nullable, Timestamp } from '../../core/schemas.js';

export const DomainParams = Type.Object({
  brandId: Type.String({ minLength: 1, maxLength: 64, description: 'Brand id (`br_…`; `ws_…` is accepted too)' }),
  domainId: Type.String({ minLength: 1, maxLength: 64 }),
});

const DOMAIN_TYPE = 'OUTBOUND: replies go out from an address at the domain, DKIM-signed. INBOUND: mail to the domain (its MX pointed at ticketd) comes in as the brand’s';
const domainType = (description: string) => Type.Union([Type.Literal('OUTBOUND'), Type.Literal('INBOUND')], { description });
const ReplyMode = Type.Union([Type.Literal('SINGLE'), Type.Literal('MATCH')], {
  description: 'SINGLE: replies come from fromEmail. MATCH: from the address at the domain the customer wrote to',
});

export const DnsRecordOut = Type.Object({
  type: Type.Union([Type.Literal('TXT'), Type.Literal('MX'), Type.Literal('CNAME')]),
  name: Type.String({ description: 'The full name to publish it under' }),
  value: Type.String(),
  priority: Type.Optional(Type.Integer({ description: 'MX only' })),
  status: Type.Union([Type.Literal('pending'), Type.Literal('verified'), Type.Literal('failed')], {
    description: 'pending: not checked yet; verified: found as given; failed: missing or different at the last check',
  }),
  purpose: Type.String({
    description:
      'dkim, spf, return_path, dmarc (suggested, not required), mx, or ownership (an INBOUND domain’s proof that it is this brand’s: a TXT record naming the domain’s id)',
  }),
  required: Type.Boolean({ description: 'Whether the domain is verified without it' }),
});

export const BrandDomainOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('brand_domain'),
  brandId: Type.String(),
  domain: Type.String(),
  type: domainType(DOMAIN_TYPE),
  verified: Type.Boolean({ description: 'Every required record found at the last check; only a verified domain is used' }),
  verifiedAt: Nullable(Timestamp),
  checkedAt: Nullable(Timestamp),
  resendDomainId: Type.Null({ description: 'Always null: ticketd sends through its own relay' }),
  fromName: Nullable(Type.String()),
  fromEmail: Nullable(Type.String()),
  replyMode: ReplyMode,
  isPrimary: Type.Boolean({ description: 'The OUTBOUND domain replies use; the first one is primary, one per brand at most' }),
  records: Type.Array(DnsRecordOut),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const CreateDomainBody = Type.Object(
  {
    domain: Type.String({ minLength: 1, maxLength: 253, description: 'A domain name such as example.com or support.example.com (not an address, no scheme)' }),
    type: Type.Optional(domainType(`${DOMAIN_TYPE}. Default OUTBOUND`)),
  },
  { additionalProperties: false },
);

export const UpdateDomainBody = Type.Object(
  {
    fromName: Type.Optional(Nullable(Type.String({ maxLength: 100 }))),
    fromEmail: Type.Optional(Nullable(EmailAddress('An address at the domain (400 otherwise)'))),
    replyMode: Type.Optional(ReplyMode),
    isPrimary: Type.Optional(Type.Boolean({ description: 'true makes it the primary OUTBOUND domain (the former one stops being primary)' })),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const VerifyOut = Type.Object({
  verified: Type.Boolean(),
  error: Type.Optional(Type.String({ description: 'What is missing or different, record by record' })),
});

export type BrandDomainView = Static<typeof BrandDomainOut>;
export type DnsRecordView = Static<typeof DnsRecordOut>;
export type CreateDomainInput = Static<typeof CreateDomainBody>;
export type UpdateDomainInput = Static<typeof UpdateDomainBody>;
export type VerifyView = Static<typeof VerifyOut>;
