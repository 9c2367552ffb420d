import t from 'tap';
import { MAX_OUTPUT, render, templateProblem, type TemplateData } from '../../server/domains/rules/templates.js';
import { servicesOf } from '../helpers/app.js';
import { freshDatabase } from '../helpers/db.js';

/** The Liquid templates of notes, mails and macro comments: what they see, and what they cannot do. */

const { db } = await freshDatabase(t);
const services = servicesOf(db);
const data: TemplateData = {
  ticket: { id: 'tkt_1', number: 42, title: 'Printer <on> fire', status: 'open', customFields: { plan: 'gold' }, tags: ['vip', 'hardware'] },
  customer: { name: 'Jane', email: 'jane@example.com' },
  brand: { id: 'br_1', name: 'Acme' },
  assignee: null,
};

t.test('placeholders, filters and conditions as Zendesk users write them', async (t) => {
  t.equal(await render(services, 'Hi {{ customer.name }}, #{{ticket.number}} "{{ ticket.title }}" at {{brand.name}}', data), 'Hi Jane, #42 "Printer <on> fire" at Acme');
  t.equal(await render(services, '{{ ticket.customFields.plan | upcase }} {{ ticket.tags | join: ", " }}', data), 'GOLD vip, hardware');
  t.equal(await render(services, '{% if assignee %}{{ assignee.name }}{% else %}nobody yet{% endif %}', data), 'nobody yet');
  t.equal(await render(services, '{{ ticket.nothing }}|{{ nothing.at.all }}', data), '|', 'what is not there is empty, not an error');
});

t.test('sandboxed: no file is read, no prototype is reached, rendering and output are bounded', async (t) => {
  t.equal(await render(services, "{% include '/etc/passwd' %}", data), "{% include '/etc/passwd' %}", 'include finds no file: the template is kept as it was');
  t.equal(await render(services, "{% render '../../package.json' %}", data), "{% render '../../package.json' %}");
  t.equal(await render(services, '{{ ticket.constructor }}{{ ticket.__proto__ }}{{ ticket.title.constructor.name }}', data), '', 'only own properties are visible');
  const runaway = '{% for i in (1..100000000) %}xxxxxxxxxx{% endfor %}';
  t.equal(await render(services, runaway, data), runaway, 'a runaway loop is stopped by the render limits: the template is kept as it was');
  const wide = await render(services, `{% for i in (1..200) %}${'x'.repeat(300)}{% endfor %}`, data);
  t.equal(wide.length, MAX_OUTPUT, `an output within the limits but longer than ${MAX_OUTPUT} characters is cut`);
  t.match(templateProblem(services, '{{ ticket.title '), /./, 'a template that does not parse says why');
  t.match(templateProblem(services, '{{ ticket.title | no_such_filter }}'), /no_such_filter|undefined filter/i, 'an unknown filter is refused');
  t.equal(templateProblem(services, '{{ ticket.title | downcase }}'), null);
});
