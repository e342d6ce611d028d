// @ts-check
// The form of each node kind inside its card: a request (Method, URL, query and header rows, a body with a JSON
// mode that checks it parses), a collection request's overrides, a webhook node's wait, a delay, a module, the
// variables a set_variables node sets; then the extractors and assertions of the kinds that have them.

import { h, field } from '../dom.js';
import { textInput, numberInput, selectInput, checkInput, control, button } from './controls.js';
import { mapRows, extractorRows, assertionRows } from './rows.js';
import { formRows, multipartRows, graphqlExtras } from './body_rows.js';
import { fieldAt, setField, jsonBodyProblem, looksJson, METHODS } from '../lib/flow_model.js';
import { parse, stringify, isObject, has } from '../lib/ordered_json.js';

/** @typedef {import('./controls.js').Editor} Editor */

/**
 * A body: a text area, and a JSON mode that says when it does not parse and can lay it out.
 * @param {Editor} ed
 */
function bodyField(ed, object, path, fieldName) {
  const value = fieldAt(object, path);
  const text = typeof value === 'string' ? value : '';
  const area = h('textarea', { rows: 4, class: 'code', spellcheck: 'false', value: text });
  area.value = text;
  area.dataset.field = fieldName;
  const json = h('input', { type: 'checkbox', checked: looksJson(text) });
  const note = h('p', { class: 'field-error body-note', 'aria-live': 'polite' });
  const check = () => {
    const problem = json.checked ? jsonBodyProblem(area.value) : null;
    note.textContent = problem ? `The body is ${problem}` : '';
    if (problem) area.setAttribute('aria-invalid', 'true');
    else area.removeAttribute('aria-invalid');
  };
  area.addEventListener('input', () => {
    setField(object, path, area.value === '' ? undefined : area.value);
    check();
    ed.changed();
  });
  json.addEventListener('change', check);
  const format = button('Format JSON', () => {
    try {
      area.value = stringify(parse(area.value), 2);
      area.dispatchEvent(new Event('input'));
    } catch (e) {
      note.textContent = `The body is not JSON: ${e.message}`;
    }
  });
  const id = `c${Math.random().toString(36).slice(2)}`;
  json.id = id;
  const part = field('Body', area);
  part.append(
    h(
      'div',
      { class: 'inline body-tools' },
      h('span', { class: 'check' }, json, h('label', { for: id }, 'JSON body')),
      format,
    ),
    note,
  );
  check();
  return part;
}

/** The body kinds of a request (#54): exactly one is sent. */
const BODY_KINDS = [
  ['body', 'Text'],
  ['form', 'Form (urlencoded)'],
  ['multipart', 'Multipart'],
  ['graphql', 'GraphQL'],
];

/** What a fresh body of each kind starts as. */
const FRESH_BODY = { form: [['name', 'value']], multipart: [{ name: 'file', value: '' }], graphql: { query: '' } };

/** The body kind a request carries. */
export function bodyKind(request) {
  return ['form', 'multipart', 'graphql'].find((kind) => has(request, kind)) || 'body';
}

/**
 * The body part of a request form: the kind, then a text body, a form's pairs, a multipart body's parts, or a GraphQL
 * query with its variables and operation name.
 * @param {Editor} ed
 */
function bodyPart(ed, request) {
  const holder = h('div', { class: 'body-kind' });
  const draw = () => {
    const kind = bodyKind(request);
    const select = h(
      'select',
      {},
      BODY_KINDS.map(([value, label]) => h('option', { value, selected: value === kind }, label)),
    );
    select.addEventListener('change', () => {
      for (const [other] of BODY_KINDS) if (other !== select.value) setField(request, [other], undefined);
      const fresh = FRESH_BODY[/** @type {keyof typeof FRESH_BODY} */ (select.value)];
      if (fresh !== undefined) setField(request, [select.value], fresh);
      ed.changed();
      draw();
    });
    const parts = [control('Body kind', select, 'request.body_kind')];
    if (kind === 'body') parts.push(bodyField(ed, request, ['body'], 'request.body'));
    if (kind === 'graphql') {
      const query = fieldAt(request, ['graphql', 'query']);
      const area = h('textarea', { rows: 4, class: 'code', spellcheck: 'false' });
      area.value = typeof query === 'string' ? query : '';
      area.addEventListener('input', () => {
        setField(request, ['graphql', 'query'], area.value);
        ed.changed();
      });
      parts.push(
        control('GraphQL query', area, 'request.graphql.query'),
        ...graphqlExtras(ed, request),
        checkInput(ed, 'Pass even when the answer has errors', request, ['graphql', 'allow_errors'], false),
      );
    }
    if (kind === 'form') parts.push(formRows(ed, request));
    if (kind === 'multipart') parts.push(multipartRows(ed, request));
    holder.replaceChildren(...parts);
  };
  draw();
  return holder;
}

/** @param {Editor} ed */
function requestForm(ed, node) {
  if (!isObject(node.request))
    return h('p', { class: 'muted', 'data-field': 'request' }, 'No request: add one in the JSON view.');
  const request = node.request;
  const methods = METHODS.map((m) => [m, m]);
  return [
    h(
      'div',
      { class: 'request-fields' },
      selectInput(ed, 'Method', request, ['method'], methods, { field: 'request.method' }),
      textInput(ed, 'URL', request, ['url'], { field: 'request.url', placeholder: '{{base_url}}/path', mono: true }),
    ),
    mapRows(ed, { legend: 'Query', noun: 'Parameter', object: request, path: ['query'], field: 'request.query' }),
    mapRows(ed, { legend: 'Headers', noun: 'Header', object: request, path: ['headers'], field: 'request.headers' }),
    bodyPart(ed, request),
    checkInput(ed, 'Send and keep cookies', request, ['cookies'], true),
  ];
}

/** @param {Editor} ed */
function overridesForm(ed, node) {
  const ref = node.request_ref;
  const collection = ed.lookups.collection(ref.collection_id);
  const request = collection && collection.requests.find((r) => r.id === ref.request_id);
  const methods = [['', `as in the collection${request ? ` (${request.method})` : ''}`], ...METHODS.map((m) => [m, m])];
  // The overrides object is made when a field is first written (setField puts it last in request_ref).
  return h(
    'fieldset',
    { class: 'overrides', 'data-field': 'request_ref' },
    h('legend', {}, 'Overrides of the collection request'),
    h(
      'p',
      { class: 'muted' },
      request ? `${request.method} ${request.url}` : 'The collection request (not readable now).',
      ' Empty fields keep the collection’s; a header or query value left empty removes it.',
    ),
    h(
      'div',
      { class: 'request-fields' },
      selectInput(ed, 'Method', ref, ['overrides', 'method'], methods, {
        optional: true,
        field: 'request_ref.overrides.method',
      }),
      textInput(ed, 'URL', ref, ['overrides', 'url'], {
        optional: true,
        field: 'request_ref.overrides.url',
        placeholder: request ? request.url : '',
        mono: true,
      }),
    ),
    mapRows(ed, {
      legend: 'Query',
      noun: 'Parameter',
      object: ref,
      path: ['overrides', 'query'],
      field: 'request_ref.overrides.query',
    }),
    mapRows(ed, {
      legend: 'Headers',
      noun: 'Header',
      object: ref,
      path: ['overrides', 'headers'],
      field: 'request_ref.overrides.headers',
    }),
    bodyField(ed, ref, ['overrides', 'body'], 'request_ref.overrides.body'),
  );
}

/** @param {Editor} ed */
function webhookForm(ed, node) {
  if (!isObject(node.webhook))
    return h('p', { class: 'muted', 'data-field': 'webhook' }, 'Edit the wait in the JSON view.');
  const wait = node.webhook;
  const endpoints = [['', "This execution's own URL"], ...ed.lookups.webhooks.map((w) => [w.id, w.name])];
  return h(
    'div',
    { class: 'request-fields' },
    selectInput(ed, 'Endpoint', wait, ['webhook_id'], endpoints, { optional: true, field: 'webhook.webhook_id' }),
    textInput(ed, 'Search', wait, ['q'], {
      optional: true,
      field: 'webhook.q',
      placeholder: 'body.$.id:{{order_id}}',
      mono: true,
    }),
    selectInput(
      ed,
      'Signature',
      wait,
      ['signature'],
      [
        ['', 'any'],
        ['valid', 'must be valid'],
      ],
      { optional: true, field: 'webhook.signature' },
    ),
    numberInput(ed, 'Timeout (ms)', wait, ['timeout_ms'], {
      optional: true,
      field: 'webhook.timeout_ms',
      placeholder: '30000',
    }),
  );
}

/** @param {Editor} ed */
function moduleForm(ed, node) {
  const flows = [
    ['', 'Choose a flow'],
    ...ed.lookups.flows.filter((f) => f.id !== ed.flow.id).map((f) => [f.id, f.name]),
  ];
  const version = h('input', {
    type: 'text',
    value: node.version === undefined || node.version === null ? '' : String(node.version),
    placeholder: 'latest',
  });
  version.addEventListener('input', () => {
    const text = version.value.trim();
    setField(node, ['version'], text === '' ? undefined : /^[0-9]+$/.test(text) ? Number(text) : text);
    ed.changed();
  });
  return [
    h(
      'div',
      { class: 'request-fields' },
      selectInput(ed, 'Flow', node, ['flow_id'], flows, { field: 'flow_id' }),
      control('Version', version, 'version', 'latest, or a published version number'),
    ),
    mapRows(ed, { legend: 'Inputs', noun: 'Input', object: node, path: ['inputs'], field: 'inputs' }),
  ];
}

/** The form of `node`'s kind. @param {Editor} ed */
export function kindForm(ed, node) {
  if (node.kind === 'request') {
    const evaluations = [extractorRows(ed, node), assertionRows(ed, node)];
    const timeout = numberInput(ed, 'Timeout (ms)', node, ['timeout_ms'], { optional: true, placeholder: '30000' });
    if (isObject(node.request_ref) && !has(node, 'request')) return [overridesForm(ed, node), evaluations, timeout];
    return [requestForm(ed, node), evaluations, timeout];
  }
  if (node.kind === 'webhook') return [webhookForm(ed, node), extractorRows(ed, node), assertionRows(ed, node)];
  if (node.kind === 'delay') return numberInput(ed, 'Delay (ms)', node, ['delay_ms'], {});
  if (node.kind === 'module') return moduleForm(ed, node);
  if (node.kind === 'set_variables')
    return mapRows(ed, {
      legend: 'Variables',
      noun: 'Variable',
      object: node,
      path: ['variables'],
      field: 'variables',
    });
  return h('p', { class: 'muted' }, 'Edit this node in the JSON view.');
}
