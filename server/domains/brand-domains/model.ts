import { TenantModel } from '../../core/model.js';

export type DomainType = 'OUTBOUND' | 'INBOUND';
export type ReplyMode = 'SINGLE' | 'MATCH';
export type RecordStatus = 'pending' | 'verified' | 'failed';

export class BrandDomain extends TenantModel {
  static override tableName = 'brand_domains';
  static override jsonAttributes = ['recordStatus'];

  declare id: string;
  declare brandId: string;
  declare domain: string;
  declare type: DomainType;
  declare verified: boolean;
  declare verifiedAt: Date | null;
  declare checkedAt: Date | null;
  declare checkError: string | null;
  /** The last check's outcome per record role (dkim, spf, return_path, dmarc, mx, ownership). */
  declare recordStatus: Partial<Record<string, RecordStatus>>;
  declare fromName: string | null;
  declare fromEmail: string | null;
  declare replyMode: ReplyMode;
  declare isPrimary: boolean;
  declare dkimSelector: string | null;
  /** Base64 of the DER public key, as the DKIM TXT record publishes it. */
  declare dkimPublicKey: string | null;
  /** The PEM private key, sealed (core/sealed.ts). */
  declare dkimPrivateKey: string | null;
  declare createdAt: Date;
  declare updatedAt: Date;
}
