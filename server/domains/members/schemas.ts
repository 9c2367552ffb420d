import { Type, type Static } from 'typebox';
import { Nullable, Timestamp } from '../../core/schemas.js';

export const MemberOut = Type.Object({
  id: Type.String({ description: 'Valid as a ticket assigneeId' }),
  object: Type.Literal('member'),
  email: Type.String(),
  name: Nullable(Type.String()),
  firstName: Nullable(Type.String()),
  lastName: Nullable(Type.String()),
  role: Type.Union([Type.Literal('owner'), Type.Literal('admin'), Type.Literal('member')]),
  status: Type.Union([Type.Literal('active'), Type.Literal('pending')]),
  createdAt: Timestamp,
});

export const MemberList = Type.Object({
  data: Type.Array(MemberOut),
  pagination: Type.Object({ cursor: Nullable(Type.String()), nextCursor: Nullable(Type.String()), hasMore: Type.Boolean() }),
});

export type MemberView = Static<typeof MemberOut>;
