// @ts-check
// The flow editor: the nodes as cards (added from a menu, moved, removed, edited with forms) beside the definition
// as JSON; both edit one model, so a change in either shows in the other, in the author's key order. Validation
// runs as the person types (`POST /flows/validate`, debounced) and each problem shows at its field; Save PATCHes
// the definition as its exact text. A person whose role cannot change flows sees it all read-only.

import { h, fill, notice } from '../dom.js';
import { call, all, can } from '../api.js';
import { send } from './send.js';
import { card } from './cards.js';
import { addMenu } from './add_menu.js';
import { showProblems } from './problems.js';
import { mapRows } from './rows.js';
import { numberInput, button } from './controls.js';
import { parse, stringify, isObject } from '../lib/ordered_json.js';
import { nodesOf } from '../lib/flow_model.js';

/** How long typing pauses before the definition is validated, and the JSON view read. */
const VALIDATE_AFTER_MS = 400;
const READ_JSON_AFTER_MS = 250;

let catalog = null;

/** The extractor kinds and assertion operators (read once a page load). */
function loadCatalog() {
  if (!catalog) {
    catalog = Promise.all([call('GET', '/assertions/operators'), call('GET', '/extractors')])
      .then(([operators, extractors]) => ({ operators: operators.items, extractors: extractors.items }))
      .catch(() => {
        catalog = null;
        return { operators: [], extractors: [] };
      });
  }
  return catalog;
}

/** What the cards show by name: endpoints, flows, and the collections request_ref nodes use. */
async function loadLookups(definition) {
  const [webhooks, flows] = await Promise.all([all('/webhooks').catch(() => []), all('/flows').catch(() => [])]);
  const collections = new Map();
  const lookups = {
    webhooks,
    flows,
    webhookNames: new Map(webhooks.map((w) => [w.id, w.name])),
    collection: (id) => collections.get(id) || null,
    loadCollection: async (id) => {
      if (!collections.has(id)) collections.set(id, await call('GET', `/collections/${id}`));
      return collections.get(id);
    },
  };
  const used = new Set(
    (Array.isArray(definition.nodes) ? definition.nodes : [])
      .filter((n) => isObject(n) && isObject(n.request_ref) && typeof n.request_ref.collection_id === 'string')
      .map((n) => n.request_ref.collection_id),
  );
  await Promise.all([...used].map((id) => lookups.loadCollection(id).catch(() => null)));
  return lookups;
}

/** The page parts the editor draws into. */
function parts(environments) {
  return {
    cards: h('ol', { id: 'editor-cards', class: 'editor-cards' }),
    json: h('textarea', {
      id: 'definition',
      rows: 24,
      spellcheck: 'false',
      class: 'code',
      'aria-label': 'Definition (JSON)',
      'aria-describedby': 'definition-note',
    }),
    jsonNote: h('p', { id: 'definition-note', class: 'field-error', 'aria-live': 'polite' }),
    problems: h('ul', { id: 'problems', class: 'problems', 'aria-live': 'polite', hidden: true }),
    status: h('p', { id: 'editor-status', class: 'muted', 'aria-live': 'polite' }),
    announce: h('p', { id: 'editor-announce', class: 'announce', 'aria-live': 'polite' }),
    flowFields: h('div', { class: 'flow-fields' }),
    environment: h(
      'select',
      { id: 'try-environment' },
      h('option', { value: '' }, 'no environment'),
      environments.map((e) => h('option', { value: e.key }, e.key)),
    ),
    error: notice(),
  };
}

/**
 * Draws the editor of `flow` (its definition read with the order-keeping parser) into `el`; answers
 * `{save, dirty, onStatus}` for the launch form (`onStatus(f)` calls `f(dirty)` whenever the status changes).
 */
export async function mountEditor(el, { flow, environments }) {
  const [catalogItems, lookups] = await Promise.all([loadCatalog(), loadLookups(flow.definition)]);
  const p = parts(environments);
  const state = {
    saved: stringify(flow.definition),
    broken: false,
    seq: 0,
    validateTimer: 0,
    jsonTimer: 0,
    problems: [],
  };
  const writable = can('flows:write');

  const dirty = () => state.broken || stringify(ed.definition) !== state.saved;
  const listeners = [];
  const showStatus = () => {
    p.status.textContent = `Draft revision ${flow.draft_revision}${dirty() ? ' · unsaved changes' : ' · saved'}`;
    for (const listener of listeners) listener(dirty());
  };
  const mark = () =>
    showProblems(ed.definition, state.problems, { cards: p.cards, summary: p.problems, flowFields: p.flowFields });

  const validate = async () => {
    clearTimeout(state.validateTimer);
    const seq = ++state.seq;
    const result = await send('POST', '/flows/validate', { definition: ed.definition, flow_id: flow.id });
    if (seq !== state.seq) return null;
    state.problems = result.problems;
    mark();
    return result;
  };
  const later = () => {
    clearTimeout(state.validateTimer);
    state.validateTimer = window.setTimeout(() => validate().catch((e) => p.error.show(e)), VALIDATE_AFTER_MS);
  };

  const drawFlowFields = () => {
    const before = p.flowFields.querySelector('details');
    const open = before
      ? before.open
      : isObject(ed.definition.variables) && Object.keys(ed.definition.variables).length > 0;
    fill(
      p.flowFields,
      h(
        'details',
        { open },
        h('summary', {}, 'Flow variables and timeout'),
        mapRows(ed, {
          legend: 'Variables',
          noun: 'Variable',
          object: ed.definition,
          path: ['variables'],
          field: 'variables',
          hint: 'Defaults every node can use as {{name}}; environments and launches override them.',
        }),
        numberInput(ed, 'Timeout (s)', ed.definition, ['timeout_s'], { optional: true, placeholder: '300' }),
      ),
    );
  };

  /** @type {import('./controls.js').Editor} */
  const ed = {
    flow,
    definition: flow.definition,
    catalog: catalogItems,
    lookups,
    tries: new WeakMap(),
    tried: new Map(),
    environment: () => p.environment.value,
    changed(origin) {
      if (origin !== 'json') {
        p.json.value = stringify(ed.definition);
        state.broken = false;
        p.jsonNote.textContent = '';
        p.json.removeAttribute('aria-invalid');
      }
      for (const li of p.cards.children) /** @type {any} */ (li).refreshSummary?.();
      showStatus();
      later();
    },
    rebuild(focus) {
      const nodes = nodesOf(ed.definition);
      fill(
        p.cards,
        nodes.map((node, i) => card(ed, node, i, nodes.length)),
      );
      if (!nodes.length) p.cards.append(h('li', { class: 'empty' }, 'No nodes yet: use Add node.'));
      drawFlowFields();
      mark();
      const target = focus && focus();
      if (target instanceof HTMLElement) target.focus();
    },
    announce(text, undo) {
      fill(p.announce, text, undo ? [' ', button('Undo', () => (fill(p.announce), undo()))] : null);
    },
  };

  const readJson = () => {
    clearTimeout(state.jsonTimer);
    state.jsonTimer = 0;
    let parsed;
    try {
      parsed = parse(p.json.value);
      if (!isObject(parsed)) throw new Error('the definition is a JSON object ({"nodes": [...]})');
    } catch (e) {
      state.broken = true;
      p.jsonNote.textContent = `Not JSON: ${e.message}. The cards show the last text that was.`;
      p.json.setAttribute('aria-invalid', 'true');
      showStatus();
      return;
    }
    state.broken = false;
    p.jsonNote.textContent = '';
    p.json.removeAttribute('aria-invalid');
    ed.definition = parsed;
    ed.rebuild();
    ed.changed('json');
  };
  p.json.addEventListener('input', () => {
    clearTimeout(state.jsonTimer);
    state.jsonTimer = window.setTimeout(readJson, READ_JSON_AFTER_MS);
  });

  const save = async () => {
    p.error.show('');
    if (state.jsonTimer) readJson();
    if (state.broken) {
      p.error.show('The JSON view does not parse: fix it before saving.');
      return false;
    }
    try {
      const result = await validate();
      if (!result) return false;
      if (!result.valid) {
        p.error.show('Not saved: the definition has problems (listed below, and at their fields).');
        return false;
      }
      const text = stringify(ed.definition);
      const answer = await send('PATCH', `/flows/${flow.id}`, { definition: ed.definition });
      state.saved = text;
      flow.draft_revision = answer.draft_revision;
      showStatus();
      ed.announce(`Saved as draft revision ${answer.draft_revision}.`);
      return true;
    } catch (e) {
      p.error.show(e);
      return false;
    }
  };

  fill(
    el,
    h(
      'div',
      { class: 'editor-toolbar' },
      h('h2', {}, 'Nodes'),
      writable ? addMenu(ed) : null,
      writable ? h('button', { type: 'button', class: 'primary', id: 'save-definition', onclick: save }, 'Save') : null,
      h('span', { class: 'try-env' }, h('label', { for: 'try-environment' }, 'Try in environment'), p.environment),
      p.status,
    ),
    writable ? null : h('p', { class: 'muted' }, 'Your role can read this flow, not change it.'),
    p.error,
    p.announce,
    p.problems,
    h(
      'div',
      { class: 'editor-columns' },
      h(
        'fieldset',
        { class: 'editor-main', disabled: !writable },
        h('legend', { class: 'visually-hidden' }, 'Nodes and flow settings'),
        p.flowFields,
        h('section', { 'aria-label': 'Nodes' }, p.cards),
      ),
      h(
        'section',
        { class: 'editor-json', 'aria-label': 'Definition' },
        h('h3', {}, 'JSON'),
        h('p', { class: 'muted' }, 'The same definition; edit either side.'),
        p.json,
        p.jsonNote,
      ),
    ),
  );
  p.json.value = stringify(ed.definition);
  p.json.readOnly = !writable;
  ed.rebuild();
  showStatus();
  validate().catch(() => {});
  return { save, dirty, onStatus: (listener) => listeners.push(listener) };
}
