import { Type, type Static } from 'typebox';
import { PageOf, PageQuery } from '../../core/pagination.js';
import { Nullable, Timestamp } from '../../core/schemas.js';
import { ORDER_STATUSES } from './model.js';

const Id = Type.String({ minLength: 1, maxLength: 64 });
const BrandId = Type.String({ minLength: 1, maxLength: 64, description: 'Brand id (`br_…`; `ws_…` is accepted too)' });
const Decimal = Type.String({ description: 'A decimal string such as "12.5000"' });

export const OrderParams = Type.Object({ brandId: BrandId, orderId: Id });
export const OrderTicketParams = Type.Object({ brandId: BrandId, orderId: Id, ticketId: Id });
export const ByTicketParams = Type.Object({ brandId: BrandId, ticketId: Id });
export const ByCustomerParams = Type.Object({ brandId: BrandId, contactId: Id });

export const OrderStatus = Type.Union(
  ORDER_STATUSES.map((s) => Type.Literal(s)),
  { description: "The order's status in ticketd's words (the platform's own is platformStatus)" },
);

export const OrderItemOut = Type.Object({
  id: Type.String(),
  platformItemId: Type.String(),
  productId: Nullable(Type.String()),
  sku: Nullable(Type.String()),
  name: Type.String(),
  quantity: Type.Integer(),
  price: Decimal,
  total: Decimal,
});

/** The store an order came from, as GET …/ecommerce/stores shows it. */
export const OrderStoreOut = Type.Object({
  id: Type.String(),
  brandId: Type.String(),
  name: Type.String(),
  platform: Type.String(),
  storeUrl: Nullable(Type.String()),
  storeId: Type.String({ description: "The platform's id of the store (BigCommerce's store hash)" }),
  status: Type.String(),
  lastSyncAt: Nullable(Timestamp),
  errorMessage: Nullable(Type.String()),
  errorCount: Type.Integer(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const OrderTicketOut = Type.Object({
  id: Type.String(),
  orderId: Type.String(),
  ticketId: Type.String(),
  linkType: Type.Union([Type.Literal('MANUAL'), Type.Literal('API'), Type.Literal('AUTOMATIC')], {
    description: 'MANUAL: linked by a member; API: by an API key; AUTOMATIC: the ticket named the order (#1234) when created',
  }),
  createdBy: Nullable(Type.String({ description: 'The member (session) or API key that linked it; null for AUTOMATIC' })),
  createdAt: Timestamp,
});

export const OrderOut = Type.Object({
  id: Type.String(),
  storeId: Type.String(),
  brandId: Type.String(),
  platformOrderId: Type.String(),
  orderNumber: Type.String(),
  customerId: Nullable(Type.String({ description: "The brand's contact whose email is customerEmail, if any" })),
  customerEmail: Nullable(Type.String()),
  customerName: Nullable(Type.String()),
  status: Type.String({ description: `One of ${ORDER_STATUSES.join(', ')}` }),
  platformStatus: Nullable(Type.String()),
  currency: Type.String(),
  subtotal: Decimal,
  shippingTotal: Decimal,
  taxTotal: Decimal,
  discountTotal: Decimal,
  total: Decimal,
  refundTotal: Decimal,
  paymentStatus: Nullable(Type.String()),
  paymentMethod: Nullable(Type.String()),
  fulfillmentStatus: Nullable(Type.String()),
  shippingMethod: Nullable(Type.String()),
  platformCreatedAt: Nullable(Timestamp),
  platformUpdatedAt: Nullable(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  items: Type.Optional(Type.Array(OrderItemOut)),
  store: Type.Optional(OrderStoreOut),
  tickets: Type.Optional(Type.Array(OrderTicketOut)),
});

export const OrderListQuery = Type.Object(
  {
    search: Type.Optional(Type.String({ maxLength: 200, description: 'An order number (with or without #), the start of the customer’s email, or part of the customer’s name' })),
    status: Type.Optional(OrderStatus),
    customerId: Type.Optional(Type.String({ maxLength: 64, description: 'A contact of the brand: the orders placed with its email (none for an unknown contact)' })),
    storeId: Type.Optional(Type.String({ maxLength: 64 })),
    ...PageQuery,
  },
  { additionalProperties: false },
);

export const OrderPage = PageOf(OrderOut);

export const LinkBody = Type.Object(
  {
    ticketId: Id,
    linkType: Type.Optional(
      Type.Union([Type.Literal('MANUAL'), Type.Literal('API')], {
        description: "Who linked it: MANUAL (a member) or API (an integration); default: the caller's kind, API for an API key, MANUAL otherwise",
      }),
    ),
  },
  { additionalProperties: false },
);

export const ProductOut = Type.Object({
  id: Type.String(),
  storeId: Type.String(),
  brandId: Type.String(),
  platformProductId: Type.String(),
  name: Type.String(),
  sku: Nullable(Type.String()),
  price: Nullable(Decimal),
  currency: Nullable(Type.String()),
  isActive: Type.Boolean(),
  inventoryLevel: Nullable(Type.Integer()),
  url: Nullable(Type.String()),
  imageUrl: Nullable(Type.String()),
  platformUpdatedAt: Nullable(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const ProductListQuery = Type.Object(
  {
    storeId: Type.Optional(Type.String({ maxLength: 64 })),
    search: Type.Optional(Type.String({ maxLength: 200, description: 'Part of the name, or the start of the SKU' })),
    isActive: Type.Optional(Type.Boolean({ description: 'true: the products on sale; false: the others; default both' })),
    ...PageQuery,
  },
  { additionalProperties: false },
);

export const ProductPage = PageOf(ProductOut);

export type OrderView = Static<typeof OrderOut>;
export type OrderItemView = Static<typeof OrderItemOut>;
export type OrderStoreView = Static<typeof OrderStoreOut>;
export type OrderTicketView = Static<typeof OrderTicketOut>;
export type OrderListInput = Static<typeof OrderListQuery>;
export type LinkInput = Static<typeof LinkBody>;
export type ProductView = Static<typeof ProductOut>;
export type ProductListInput = Static<typeof ProductListQuery>;
