import { TenantModel } from '../../core/model.js';

export class Comment extends TenantModel {
  static override tableName = 'comments';
  static override jsonAttributes = ['links', 'metadata', 'sourceData'];

  declare id: string;
  declare brandId: string;
  declare ticketId: string;
  declare parentId: string | null;
  declare body: string;
  declare authorId: string | null;
  declare authorName: string | null;
  declare authorType: 'CUSTOMER' | 'AGENT' | 'SYSTEM';
  declare isInternal: boolean;
  declare links: { url: string; title?: string | null; type?: string | null }[];
  declare metadata: Record<string, unknown>;
  declare source: string;
  declare sourceId: string | null;
  declare sourceData: Record<string, unknown> | null;
  declare cc: string[];
  declare connectionId: string | null;
  declare createdAt: Date;
  declare updatedAt: Date;
  declare deletedAt: Date | null;
}
