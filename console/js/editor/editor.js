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

/** The editor's model and page parts: what the cards, rows and tries (the `Editor` of controls.js) talk to. */
class FlowEditor {
  constructor(flow, catalog, lookups, environments) {
    this.flow = flow;
    this.definition = flow.definition;
    this.catalog = catalog;
    this.lookups = lookups;
    this.tries = new WeakMap();
    this.tried = new Map();
    this.p = parts(environments);
    this.state = { saved: stringify(flow.definition), broken: false, seq: 0, validateTimer: 0, jsonTimer: 0 };
    this.problems = [];
    this.listeners = [];
    this.p.json.addEventListener('input', () => {
      clearTimeout(this.state.jsonTimer);
      this.state.jsonTimer = window.setTimeout(() => this.readJson(), READ_JSON_AFTER_MS);
    });
  }

  environment() {
    return this.p.environment.value;
  }

  /** Whether the definition differs from the saved one (or the JSON view does not parse). */
  dirty() {
    return this.state.broken || stringify(this.definition) !== this.state.saved;
  }

  showStatus() {
    const dirty = this.dirty();
    this.p.status.textContent = `Draft revision ${this.flow.draft_revision}${dirty ? ' · unsaved changes' : ' · saved'}`;
    for (const listener of this.listeners) listener(dirty);
  }

  /** Shows the last validation's problems at their fields. */
  mark() {
    const { cards, problems: summary, flowFields } = this.p;
    showProblems(this.definition, this.problems, { cards, summary, flowFields });
  }

  /** Validates the definition now; answers the answer, or null when a newer validation overtook it. */
  async validate() {
    clearTimeout(this.state.validateTimer);
    const seq = ++this.state.seq;
    const result = await send('POST', '/flows/validate', { definition: this.definition, flow_id: this.flow.id });
    if (seq !== this.state.seq) return null;
    this.problems = result.problems;
    this.mark();
    return result;
  }

  /** The model changed (`origin` 'json' when the JSON view changed it): the other views follow. */
  changed(origin) {
    const { p } = this;
    if (origin !== 'json') {
      const { scrollTop } = p.json;
      p.json.value = stringify(this.definition);
      p.json.scrollTop = scrollTop;
      this.state.broken = false;
      p.jsonNote.textContent = '';
      p.json.removeAttribute('aria-invalid');
    }
    for (const li of p.cards.children) /** @type {any} */ (li).refreshSummary?.();
    this.showStatus();
    clearTimeout(this.state.validateTimer);
    this.state.validateTimer = window.setTimeout(
      () => this.validate().catch((e) => p.error.show(e)),
      VALIDATE_AFTER_MS,
    );
  }

  /** Draws every card again (after a node is added, moved or removed); `focus` answers what gets the focus. */
  rebuild(focus) {
    const nodes = nodesOf(this.definition);
    fill(
      this.p.cards,
      nodes.map((node, i) => card(this, node, i, nodes.length)),
    );
    if (!nodes.length) this.p.cards.append(h('li', { class: 'empty' }, 'No nodes yet: use Add node.'));
    this.drawFlowFields();
    this.mark();
    const target = focus && focus();
    if (target instanceof HTMLElement) target.focus();
  }

  /** Says what just happened, with an Undo button when `undo` is given. */
  announce(text, undo) {
    const { announce } = this.p;
    fill(announce, text, undo ? [' ', button('Undo', () => (fill(announce), undo()))] : null);
  }

  /** The flow's own fields: its variables and timeout. */
  drawFlowFields() {
    const before = this.p.flowFields.querySelector('details');
    const variables = this.definition.variables;
    const open = before ? before.open : isObject(variables) && Object.keys(variables).length > 0;
    fill(
      this.p.flowFields,
      h(
        'details',
        { open },
        h('summary', {}, 'Flow variables and timeout'),
        mapRows(this, {
          legend: 'Variables',
          noun: 'Variable',
          object: this.definition,
          path: ['variables'],
          field: 'variables',
          hint: 'Defaults every node can use as {{name}}; environments and launches override them.',
        }),
        numberInput(this, 'Timeout (s)', this.definition, ['timeout_s'], { optional: true, placeholder: '300' }),
      ),
    );
  }

  /** Reads the JSON view into the model when it parses; says where it does not. */
  readJson() {
    const { p, state } = this;
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
      this.showStatus();
      return;
    }
    state.broken = false;
    p.jsonNote.textContent = '';
    p.json.removeAttribute('aria-invalid');
    this.definition = parsed;
    this.rebuild();
    this.changed('json');
  }

  /** Validates, then PATCHes the definition as its exact text; answers whether it was saved. */
  async save() {
    const { p, state } = this;
    p.error.show('');
    if (state.jsonTimer) this.readJson();
    if (state.broken) {
      p.error.show('The JSON view does not parse: fix it before saving.');
      return false;
    }
    try {
      const result = await this.validate();
      if (!result) return false;
      if (!result.valid) {
        p.error.show('Not saved: the definition has problems (listed below, and at their fields).');
        return false;
      }
      const text = stringify(this.definition);
      const answer = await send('PATCH', `/flows/${this.flow.id}`, { definition: this.definition });
      state.saved = text;
      this.flow.draft_revision = answer.draft_revision;
      this.showStatus();
      this.announce(`Saved as draft revision ${answer.draft_revision}.`);
      return true;
    } catch (e) {
      p.error.show(e);
      return false;
    }
  }

  /** The editor's page: toolbar, messages, the cards beside the JSON view. */
  layout(writable) {
    const { p } = this;
    return [
      h(
        'div',
        { class: 'editor-toolbar' },
        h('h2', {}, 'Nodes'),
        writable ? addMenu(this) : null,
        writable
          ? h('button', { type: 'button', class: 'primary', id: 'save-definition', onclick: () => this.save() }, 'Save')
          : null,
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
          h('legend', {}, 'Nodes and flow settings'),
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
    ];
  }
}

/**
 * Draws the editor of `flow` (its definition read with the order-keeping parser) into `el`; answers
 * `{save, dirty, onStatus}` for the launch form (`onStatus(f)` calls `f(dirty)` whenever the status changes).
 */
export async function mountEditor(el, { flow, environments }) {
  const [catalogItems, lookups] = await Promise.all([loadCatalog(), loadLookups(flow.definition)]);
  const editor = new FlowEditor(flow, catalogItems, lookups, environments);
  const writable = can('flows:write');
  fill(el, editor.layout(writable));
  editor.p.json.value = stringify(flow.definition);
  editor.p.json.readOnly = !writable;
  editor.rebuild();
  editor.showStatus();
  editor.validate().catch(() => {});
  return {
    save: () => editor.save(),
    dirty: () => editor.dirty(),
    onStatus: (listener) => editor.listeners.push(listener),
  };
}
