// @ts-check
// An endpoint's triggers on its page: the flows its captures launch, listed, and an editor (add or remove a
// trigger: the flow picked by name, the search a capture must match, environment, version, launch variables and
// values taken from the body) saved with PATCH; a refusal is shown beside the field it names (`triggers[1].q`).

import { h, fill, field, notice, table } from '../dom.js';
import { call, all, can } from '../api.js';

/** The most triggers an endpoint holds (the API's limit). */
const MAX = 10;

/** The trigger fields a refusal may name, as the editor's inputs are keyed. */
const FIELDS = ['flow_id', 'q', 'environment', 'version', 'variables', 'extract'];

function version(v) {
  if (v === undefined || v === null) return 'the draft';
  return v === 'latest' ? 'latest published' : `v${v}`;
}

function lines(map) {
  return Object.entries(map || {})
    .map(([k, v]) => `${k}=${v}`)
    .join('\n');
}

/** `name=value` lines as an object; a line without `=` is refused with its text. */
function parseLines(text) {
  const out = {};
  for (const line of text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)) {
    const at = line.indexOf('=');
    if (at <= 0) throw new Error(`"${line}" is not name=value`);
    out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return out;
}

/** The triggers as a table, flows by name. */
function listing(triggers, names) {
  return table(
    [
      ['Flow', (t) => h('a', { href: `#/flows/${t.flow_id}` }, names.get(t.flow_id) || `flow ${t.flow_id}`)],
      [
        'Search',
        (t) => [
          t.q ? h('code', {}, t.q) : 'every capture',
          t.filter ? h('div', { class: 'muted' }, 'and a filter') : null,
        ],
      ],
      ['Environment', (t) => t.environment || '—'],
      ['Version', (t) => version(t.version)],
      ['Variables', (t) => Object.entries(t.variables || {}).map(([k, v]) => h('div', {}, h('code', {}, k), ' = ', v))],
      [
        'From the body',
        (t) => Object.entries(t.extract || {}).map(([k, v]) => h('div', {}, h('code', {}, k), ' ← ', h('code', {}, v))),
      ],
    ],
    triggers,
    'No triggers: captures start no flow.',
  );
}

/** A flow's environments and published versions, read once per flow. */
function choices() {
  const known = new Map();
  return (flowId) => {
    if (!flowId) return Promise.resolve({ environments: [], versions: [] });
    if (!known.has(flowId)) {
      known.set(
        flowId,
        Promise.all([
          call('GET', `/flows/${flowId}/environments`)
            .then((e) => e.items)
            .catch(() => []),
          all(`/flows/${flowId}/versions`, 200).catch(() => []),
        ]).then(([environments, versions]) => ({ environments, versions })),
      );
    }
    return known.get(flowId);
  };
}

/** The options of a select, keeping a stored value the list no longer holds. */
function setOptions(select, options, current) {
  if (current && !options.some(([value]) => value === current)) options.push([current, current]);
  fill(
    select,
    options.map(([value, label]) => h('option', { value }, label)),
  );
  select.value = current || '';
}

/** One trigger's fieldset; `read()` answers the trigger to send, `inputs` its controls by field name. */
function triggerFields(trigger, flows, lookup, onRemove) {
  const flow = h('select', { name: 'flow' });
  setOptions(flow, [['', 'choose a flow'], ...flows.map((f) => [f.id, f.name])], trigger.flow_id);
  const q = h('input', { name: 'q', value: trigger.q || '', placeholder: 'body.$.type:payment.succeeded' });
  const environment = h('select', { name: 'environment' });
  const versionSelect = h('select', { name: 'version' });
  const variables = h(
    'textarea',
    { name: 'variables', rows: 2, class: 'code', placeholder: 'name=value, one a line' },
    lines(trigger.variables),
  );
  const extract = h(
    'textarea',
    { name: 'extract', rows: 2, class: 'code', placeholder: 'order_id=$.data.id, one a line' },
    lines(trigger.extract),
  );
  const refill = async (kept) => {
    const { environments, versions } = await lookup(flow.value);
    setOptions(environment, [['', 'no environment'], ...environments.map((e) => [e.key, e.key])], kept.environment);
    const stored = kept.version === undefined || kept.version === null ? '' : String(kept.version);
    setOptions(
      versionSelect,
      [['', 'the draft'], ['latest', 'latest published'], ...versions.map((v) => [String(v.version), `v${v.version}`])],
      stored,
    );
  };
  let ready = refill(trigger);
  flow.addEventListener('change', () => {
    ready = refill({});
  });
  const inputs = { flow_id: flow, q, environment, version: versionSelect, variables, extract };
  const part = h(
    'fieldset',
    { class: 'stack trigger' },
    h('legend', {}, 'Trigger'),
    field('Flow', flow),
    field('Search', q, 'Captures matching this launch the flow; empty: every capture.'),
    field('Environment', environment),
    field('Version', versionSelect),
    field('Variables', variables, 'Launch variables of every run it starts.'),
    field('From the body', extract, 'Launch variables read from the JSON body by JSONPath.'),
    trigger.filter
      ? h('p', { class: 'muted' }, 'Also a filter (kept as stored): ', h('code', {}, JSON.stringify(trigger.filter)))
      : null,
    h('button', { type: 'button', class: 'small danger', onclick: onRemove }, 'Remove trigger'),
  );
  const read = () => {
    const out = { flow_id: flow.value };
    if (q.value.trim()) out.q = q.value.trim();
    if (trigger.filter) out.filter = trigger.filter;
    if (environment.value) out.environment = environment.value;
    if (versionSelect.value) out.version = versionSelect.value === 'latest' ? 'latest' : Number(versionSelect.value);
    for (const [name, input] of [
      ['variables', variables],
      ['extract', extract],
    ]) {
      let parsed;
      try {
        parsed = parseLines(input.value);
      } catch (e) {
        throw Object.assign(e, { field: name });
      }
      if (Object.keys(parsed).length) out[name] = parsed;
    }
    if (!out.flow_id) throw Object.assign(new Error('Choose the flow this trigger launches.'), { field: 'flow_id' });
    return out;
  };
  return { part, read, inputs, ready: () => ready };
}

/** Shows `message` beside the control of `name` (or at the top of the trigger's fieldset). */
function markField(row, name, message) {
  const input = row.inputs[name];
  const note = h(
    'p',
    { class: 'field-error', role: 'alert', id: `err-${Math.random().toString(36).slice(2)}` },
    message,
  );
  if (input) {
    input.setAttribute('aria-invalid', 'true');
    input.setAttribute('aria-describedby', note.id);
    input.closest('.field').append(note);
  } else {
    row.part.querySelector('legend').after(note);
  }
}

function clearMarks(form) {
  for (const old of form.querySelectorAll('.field-error')) old.remove();
  for (const input of form.querySelectorAll('[aria-invalid]')) {
    input.removeAttribute('aria-invalid');
    input.removeAttribute('aria-describedby');
  }
}

/** The editor of an endpoint's triggers; `onSaved(webhook)` gets the endpoint the API answered. */
function editor(webhook, flows, onSaved) {
  const lookup = choices();
  const error = notice();
  const list = h('div', { class: 'trigger-list' });
  const rows = [];
  const renumber = () =>
    rows.forEach((row, i) => {
      row.part.querySelector('legend').textContent = `Trigger ${i + 1}`;
    });
  const addRow = (trigger) => {
    const row = triggerFields(trigger, flows, lookup, () => {
      rows.splice(rows.indexOf(row), 1);
      row.part.remove();
      renumber();
    });
    rows.push(row);
    list.append(row.part);
    renumber();
    return row;
  };
  (webhook.triggers || []).forEach(addRow);
  const add = h(
    'button',
    {
      type: 'button',
      id: 'add-trigger',
      onclick: () => {
        if (rows.length >= MAX) {
          error.show(`An endpoint holds at most ${MAX} triggers.`);
          return;
        }
        addRow({}).part.querySelector('select').focus();
      },
    },
    'Add trigger',
  );
  const form = h(
    'form',
    { class: 'stack', 'aria-label': 'Edit triggers' },
    error,
    list,
    h('div', { class: 'actions' }, add, h('button', { type: 'submit', class: 'primary', id: 'save-triggers' }, 'Save')),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.show('');
    clearMarks(form);
    await Promise.all(rows.map((row) => row.ready()));
    const triggers = [];
    for (const row of rows) {
      try {
        triggers.push(row.read());
      } catch (e) {
        markField(row, e.field, e.message);
        error.show('Check the marked field.');
        return;
      }
    }
    try {
      const saved = await call('PATCH', `/webhooks/${webhook.id}`, { triggers });
      error.show('Saved.', 'info');
      onSaved(saved);
    } catch (e) {
      const named = /triggers\[(\d+)\]\.?([a-z_]*)/.exec(e.message || '');
      const row = named && rows[Number(named[1])];
      if (row) markField(row, FIELDS.includes(named[2]) ? named[2] : null, e.message);
      error.show(e);
    }
  });
  return form;
}

/** The Triggers section of an endpoint's page. */
export async function showTriggers(el, webhook) {
  const flows = await all('/flows').catch(() => []);
  const names = new Map(flows.map((f) => [f.id, f.name]));
  const summary = h('div', { id: 'trigger-table' }, listing(webhook.triggers || [], names));
  const writable = can('webhooks:write') && can('flows:execute');
  const edit = writable
    ? h(
        'details',
        { class: 'edit-triggers' },
        h('summary', {}, 'Edit triggers'),
        editor(webhook, flows, (saved) => fill(summary, listing(saved.triggers || [], names))),
      )
    : null;
  fill(
    el,
    h('h2', {}, 'Triggers'),
    h(
      'p',
      { class: 'muted' },
      'Each capture that matches a trigger launches its flow once, with the capture as launch variables.',
    ),
    summary,
    edit,
  );
}
