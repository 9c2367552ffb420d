import { TenantModel } from '../../core/model.js';
import type { Schedule } from './schedule.js';

export class RecurringTicket extends TenantModel {
  static override tableName = 'recurring_tickets';
  static override jsonAttributes = ['customFields', 'schedule'];

  declare id: string;
  declare brandId: string;
  declare title: string;
  declare body: string | null;
  declare priority: string | null;
  declare assigneeId: string | null;
  declare categoryId: string | null;
  /** Tag ids or names, as given. */
  declare tags: string[];
  declare customFields: Record<string, unknown>;
  /** Null exactly when cronExpr decides. */
  declare schedule: Schedule | null;
  declare cronExpr: string | null;
  declare timezone: string;
  declare enabled: boolean;
  declare nextRunAt: Date;
  declare lastRunAt: Date | null;
  declare lastTicketId: string | null;
  declare runCount: number;
  /** Scheduled runs that failed since the last ticket it opened. */
  declare failCount: number;
  declare lastError: string | null;
  declare createdBy: string | null;
  declare createdAt: Date;
  declare updatedAt: Date;
}
