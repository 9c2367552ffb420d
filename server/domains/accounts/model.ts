import objection from 'objection';

/** The tenant itself; every tenant row points here. */
export class Account extends objection.Model {
  static override tableName = 'accounts';

  declare id: string;
  declare name: string;
  declare createdAt: Date;
  declare updatedAt: Date;
}
