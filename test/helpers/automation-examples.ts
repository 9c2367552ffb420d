/** The worked examples of docs/api.md, "Automations", as POST …/automations bodies: the tests and the bench use them as documented. */

export const CLOSE_RESOLVED_AFTER_4_DAYS = {
  name: 'Close resolved tickets after 4 days',
  conditions: {
    all: [
      { field: 'status', operator: 'is', value: 'resolved' },
      { field: 'hoursSinceResolved', operator: 'gte', value: 96 },
    ],
  },
  actions: [{ type: 'set_status', value: 'closed' }],
};

export const REMIND_THE_ASSIGNEE = {
  name: 'Remind the assignee after a day untouched',
  conditions: {
    all: [
      { field: 'hoursSinceUpdated', operator: 'gte', value: 24 },
      { field: 'status', operator: 'is', value: 'open' },
      { field: 'assigneeId', operator: 'present' },
    ],
  },
  actions: [{ type: 'mail_members', value: { subject: 'Waiting on you: {{ ticket.title }}', body: 'Ticket #{{ ticket.number }} has waited a day.' } }],
};

export const ESCALATE_BEFORE_DUE = {
  name: 'Escalate two hours before due',
  conditions: {
    all: [
      { field: 'hoursUntilDue', operator: 'lte', value: 2 },
      { field: 'priority', operator: 'is_not', value: 'urgent' },
    ],
  },
  actions: [{ type: 'set_priority', value: 'urgent' }],
};
