import { TenantModel } from '../../core/model.js';

export type ConnectionStatus = 'ACTIVE' | 'SYNCING' | 'ERROR' | 'DISCONNECTED';

export class EmailConnection extends TenantModel {
  static override tableName = 'email_connections';

  declare id: string;
  declare brandId: string;
  declare name: string;
  declare provider: 'IMAP' | 'GMAIL' | 'OUTLOOK';
  declare email: string;
  declare host: string;
  declare port: number;
  declare tls: boolean;
  declare username: string;
  /** The password (or refresh token), sealed (core/sealed.ts). */
  declare secret: string;
  declare mailbox: string;
  /** Where taken-in messages are moved; null: they are flagged \Seen and stay. */
  declare moveTo: string | null;
  declare isPrimary: boolean;
  declare status: ConnectionStatus;
  declare errorMessage: string | null;
  declare failures: number;
  declare retryAt: Date | null;
  declare lastSyncAt: Date | null;
  declare uidValidity: string | null;
  declare lastUid: string;
  declare createdAt: Date;
  declare updatedAt: Date;
}
