/**
 * The columns of a ticket, declared once. The view's select list, ticket create's input
 * relation and its insert list derive from this; a new field is one line here (plus its
 * migration, schema and view).
 * `given`: the create supplies it (else the database or the statement fills it in).
 */
export interface TicketColumn {
  readonly column: string;
  readonly type: 'text' | 'int' | 'boolean' | 'jsonb' | 'timestamptz';
  readonly given: boolean;
}

const given = (column: string, type: TicketColumn['type']): TicketColumn => ({ column, type, given: true });
const filled = (column: string, type: TicketColumn['type']): TicketColumn => ({ column, type, given: false });

export const TICKET_COLUMNS: readonly TicketColumn[] = [
  given('id', 'text'),
  filled('account_id', 'text'),
  filled('livemode', 'boolean'),
  given('brand_id', 'text'),
  filled('ticket_number', 'int'),
  given('title', 'text'),
  given('body', 'text'),
  given('status', 'text'),
  given('priority', 'text'),
  given('assignee_id', 'text'),
  given('created_by', 'text'),
  filled('customer_id', 'text'),
  given('category_id', 'text'),
  given('links', 'jsonb'),
  given('custom_fields', 'jsonb'),
  given('metadata', 'jsonb'),
  given('source', 'text'),
  given('source_id', 'text'),
  given('source_data', 'jsonb'),
  filled('is_spam', 'boolean'),
  filled('merged_into_id', 'text'),
  filled('comment_count', 'int'),
  given('attachment_count', 'int'),
  given('close_reason', 'text'),
  given('due_at', 'timestamptz'),
  given('due_at_manual', 'boolean'),
  filled('created_at', 'timestamptz'),
  filled('updated_at', 'timestamptz'),
  filled('deleted_at', 'timestamptz'),
  filled('legal_hold', 'boolean'),
];

/**
 * The columns a ticket view reads. Not `tickets.*`: the derived list and search columns
 * (search_vector can be as large as the body) stay in the database.
 */
export const VIEW_COLUMNS = TICKET_COLUMNS.map((c) => c.column);

/** The columns a create supplies, in declaration order. */
export const GIVEN_COLUMNS = TICKET_COLUMNS.filter((c) => c.given);
