// @ts-check
// Importing a file of another tool (Postman, Insomnia, HAR, curl, Swagger 2.0, OpenAPI): a file or pasted text,
// previewed first (what would be imported and the conversion report: converted test lines, the lines that were not
// converted with their place, warnings), stored only when the person confirms.

import { h, field, notice } from '../dom.js';
import { call } from '../api.js';

const FORMATS = [
  ['', 'Detect'],
  ['postman', 'Postman collection'],
  ['postman_environment', 'Postman environment'],
  ['insomnia', 'Insomnia export'],
  ['har', 'HAR'],
  ['curl', 'curl command lines'],
  ['swagger2', 'Swagger 2.0'],
  ['openapi', 'OpenAPI 3'],
];

/** How many of the previewed requests are listed (the rest are counted). */
const SHOWN_REQUESTS = 200;

/** The report of a previewed import, as a list a person reads before storing anything. */
function reportView(answer) {
  const report = answer.report;
  const requests = answer.collection ? answer.collection.requests.length : 0;
  const items = [
    h(
      'p',
      { id: 'import-summary' },
      `${requests} requests in ${answer.summary.folders} folders; ${report.converted} test lines converted, ` +
        `${report.not_converted.length} not converted.`,
    ),
  ];
  if (requests) {
    // Every request the import would store, in order, by its folder and name.
    const shown = answer.collection.requests.slice(0, SHOWN_REQUESTS);
    items.push(
      h('h3', {}, 'Requests'),
      h(
        'ul',
        { id: 'import-requests' },
        ...shown.map((r) =>
          h(
            'li',
            {},
            h('span', { class: `method method-${r.method.toLowerCase()}` }, r.method),
            ' ',
            r.folder ? `${r.folder}/${r.name}` : r.name,
            ' ',
            h('code', {}, r.url),
          ),
        ),
      ),
      requests > shown.length ? h('p', { class: 'muted' }, `and ${requests - shown.length} more`) : null,
    );
  }
  if (report.not_converted.length) {
    items.push(
      h('h3', {}, 'Not converted'),
      h(
        'ul',
        { id: 'import-not-converted' },
        ...report.not_converted.map((line) => h('li', {}, h('code', {}, `${line.where}:${line.line}`), ' ', line.text)),
      ),
    );
  }
  if (report.warnings.length) {
    items.push(
      h('h3', {}, 'Warnings'),
      h('ul', { id: 'import-warnings' }, ...report.warnings.map((w) => h('li', {}, w))),
    );
  }
  return h('section', { 'aria-label': 'Import report' }, ...items);
}

export function importToolDialog() {
  const error = notice();
  const format = h('select', {}, ...FORMATS.map(([value, label]) => h('option', { value }, label)));
  const file = h('input', { type: 'file', accept: '.json,.yaml,.yml,.har,.txt,.sh' });
  const text = h('textarea', { rows: 8, class: 'code', placeholder: 'or paste the export, HAR or curl lines' });
  const name = h('input', { maxlength: 200 });
  const flow = h('input', { maxlength: 200, placeholder: 'a flow name to also make a flow of the requests' });
  const preview = h('div', { id: 'import-preview' });
  const store = h('button', { type: 'button', class: 'primary', disabled: true }, 'Import');
  let body = null;
  const read = async () => {
    const pasted = text.value.trim() ? text.value : null;
    const chosen = file.files && file.files[0] ? await file.files[0].text() : null;
    const document = pasted ?? chosen;
    if (!document) throw new Error('Choose a file or paste its text.');
    return {
      name: name.value.trim() || undefined,
      format: format.value || undefined,
      source: { document },
      flow: flow.value.trim() ? { name: flow.value.trim() } : undefined,
    };
  };
  const form = h(
    'form',
    { class: 'stack' },
    error,
    field('Format', format),
    field('File', file),
    field('Text', text),
    field('Collection name (optional)', name),
    field('Flow (optional)', flow),
    h('button', { type: 'submit' }, 'Preview'),
    preview,
    store,
  );
  const box = h(
    'dialog',
    { 'aria-label': 'Import from another tool' },
    h('h2', {}, 'Import from another tool'),
    form,
    h('form', { method: 'dialog', class: 'actions' }, h('button', { type: 'submit' }, 'Cancel')),
  );
  // Any change makes the preview stale: it must be looked at again before storing.
  for (const input of [format, file, text, name, flow]) {
    input.addEventListener('input', () => {
      store.disabled = true;
      body = null;
    });
  }
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      body = await read();
      const answer = await call('POST', '/collections/import/preview', body);
      preview.replaceChildren(reportView(answer));
      store.disabled = false;
    } catch (e) {
      error.show(e);
    }
  });
  store.addEventListener('click', async () => {
    if (!body) return;
    try {
      const answer = await call('POST', '/collections/import', body);
      box.close();
      location.hash = answer.collection ? `#/collections/${answer.collection.id}` : `#/flows/${answer.flow.id}`;
    } catch (e) {
      error.show(e);
    }
  });
  document.body.append(box);
  box.addEventListener('close', () => box.remove());
  box.showModal();
}
