// @ts-check
// Try a node: "Try" sends the card's request node now (`POST /flows/{id}/try`, through the server's guarded client,
// with the editor's chosen environment and the values earlier tries extracted) and shows the node result. A JSON
// response body is a tree: a value picked there becomes a `jsonPath` extractor, or an assertion that it equals
// what came back.

import { h, fill, badge, table } from '../dom.js';
import { send } from './send.js';
import { jsonPath, nameFromPath, pickValue } from '../lib/flow_model.js';
import { parse, entries, names, put, isObject } from '../lib/ordered_json.js';

/** @typedef {import('./controls.js').Editor} Editor */

/** The most values a response tree draws. */
const MAX_VALUES = 400;

/** The area under a card where its tries show (the last one again after a redraw). @param {Editor} ed */
export function tryArea(ed, node) {
  const area = h('div', { class: 'try-area', 'aria-live': 'polite' });
  const last = ed.tries.get(node);
  if (last) show(ed, node, area, last);
  return area;
}

/** The values earlier nodes' tries extracted, as launch variables (text). @param {Editor} ed */
function earlierValues(ed, index) {
  const variables = {};
  for (const earlier of ed.definition.nodes.slice(0, index)) {
    const got = isObject(earlier) && ed.tried.get(earlier.id);
    for (const [name, value] of entries(got || {})) {
      put(variables, name, typeof value === 'string' ? value : JSON.stringify(value));
    }
  }
  return variables;
}

/** Sends the node at `index` now and shows what came back. @param {Editor} ed */
export async function tryNode(ed, node, index, area) {
  const body = { node };
  const environment = ed.environment();
  if (environment) body.environment = environment;
  const variables = earlierValues(ed, index);
  if (names(variables).length) body.variables = variables;
  fill(area, h('p', { class: 'muted' }, `Sending ${node.id}…`));
  try {
    const result = await send('POST', `/flows/${ed.flow.id}/try`, body);
    result.used = names(variables);
    ed.tries.set(node, result);
    if (isObject(result.extracted)) ed.tried.set(node.id, result.extracted);
    show(ed, node, area, result);
  } catch (e) {
    fill(area, h('p', { class: 'notice notice-error', role: 'alert' }, `Try failed: ${e.message}`));
  }
}

/** A response body: a tree when it is JSON, else its text. */
function bodyView(ed, node, area, response) {
  if (!response.body) return h('p', { class: 'empty' }, 'No body.');
  let value;
  try {
    value = parse(response.body);
  } catch {
    return h('pre', { class: 'body' }, response.body);
  }
  const pick = h('div', { class: 'pick', hidden: true });
  const budget = { left: MAX_VALUES };
  const choose = (segments, picked, from) => pickForm(ed, node, pick, segments, picked, from);
  return h(
    'div',
    { class: 'response-tree' },
    h('p', { class: 'muted' }, 'Pick a value to extract it or assert on it.'),
    h('div', { class: 'json-tree-root' }, tree(value, [], choose, budget)),
    budget.left < 0 ? h('p', { class: 'muted' }, `Only the first ${MAX_VALUES} values are shown.`) : null,
    pick,
  );
}

/** What a container holds, in brackets: `[2 items]`, `{1 key}`. */
function sizeOf(value, count) {
  const noun = `${Array.isArray(value) ? 'item' : 'key'}${count === 1 ? '' : 's'}`;
  return Array.isArray(value) ? `[${count} ${noun}]` : `{${count} ${noun}}`;
}

/** One value of the tree and what is inside it. */
function tree(value, segments, choose, budget) {
  budget.left -= 1;
  if (budget.left < 0) return null;
  const path = jsonPath(segments);
  if (!isObject(value) && !Array.isArray(value)) {
    const text = JSON.stringify(value);
    return h(
      'button',
      {
        type: 'button',
        class: 'json-value',
        title: path,
        'data-path': path,
        onclick: (e) => choose(segments, value, e.currentTarget),
      },
      text.length > 120 ? `${text.slice(0, 117)}…` : text,
    );
  }
  const items = Array.isArray(value) ? value.map((v, i) => [i, v]) : entries(value);
  const whole = h(
    'button',
    {
      type: 'button',
      class: 'json-value json-whole',
      title: path,
      'data-path': path,
      onclick: (e) => choose(segments, value, e.currentTarget),
    },
    sizeOf(value, items.length),
  );
  return [
    whole,
    h(
      'ul',
      { class: 'json-tree' },
      items.map(([key, v]) =>
        budget.left < 0
          ? null
          : h(
              'li',
              {},
              h('span', { class: 'json-key' }, typeof key === 'number' ? `${key}:` : `${JSON.stringify(key)}:`),
              ' ',
              tree(v, [...segments, key], choose, budget),
            ),
      ),
    ),
  ];
}

/** The form a picked value opens: its path, a name, "Add as extractor" and "Add as assertion". @param {Editor} ed */
function pickForm(ed, node, pick, segments, value, from) {
  const taken = new Set((Array.isArray(node.extractors) ? node.extractors : []).map((e) => e && e.name));
  const name = h('input', { type: 'text', value: nameFromPath(segments, taken), spellcheck: 'false', class: 'code' });
  const nameId = `pick-${Math.random().toString(36).slice(2)}`;
  name.id = nameId;
  const add = (assert) => {
    if (!name.value.trim()) return name.focus();
    const used = pickValue(node, segments, name.value.trim(), value, assert);
    ed.changed();
    const index = ed.definition.nodes.indexOf(node);
    const list = assert ? node.assertions : node.extractors;
    const field = assert ? `assertions[${list.length - 1}].expected` : `extractors[${list.length - 1}].name`;
    ed.announce(
      assert
        ? `Added an assertion that ${used} equals ${JSON.stringify(value)}.`
        : `Added extractor ${used} (${jsonPath(segments)}).`,
    );
    ed.rebuild(() => document.querySelectorAll('#editor-cards > li')[index]?.querySelector(`[data-field="${field}"]`));
  };
  fill(
    pick,
    h(
      'p',
      {},
      'Value at ',
      h('code', {}, jsonPath(segments)),
      ': ',
      h('code', {}, JSON.stringify(value).slice(0, 200)),
    ),
    h('div', { class: 'field' }, h('label', { for: nameId }, 'Variable name'), name),
    h(
      'div',
      { class: 'actions' },
      h('button', { type: 'button', class: 'small', onclick: () => add(false) }, 'Add as extractor'),
      h('button', { type: 'button', class: 'small', onclick: () => add(true) }, 'Add as assertion'),
      h(
        'button',
        {
          type: 'button',
          class: 'small',
          onclick: () => {
            pick.hidden = true;
            from.focus();
          },
        },
        'Cancel',
      ),
    ),
  );
  pick.hidden = false;
  name.focus();
  name.select();
}

/** A try's node result. @param {Editor} ed */
function show(ed, node, area, result) {
  const response = isObject(result.response) ? result.response : null;
  const request = isObject(result.request) ? result.request : null;
  const assertions = Array.isArray(result.assertions) ? result.assertions : [];
  const extracted = entries(result.extracted || {});
  fill(
    area,
    h('h4', {}, 'Tried: ', badge(result.status || 'error')),
    result.used && result.used.length
      ? h('p', { class: 'muted' }, `With values from earlier tries: ${result.used.join(', ')}`)
      : null,
    result.error ? h('p', { class: 'node-error' }, result.error) : null,
    request
      ? h('p', { class: 'request-line' }, h('strong', {}, request.method), ' ', h('code', {}, request.url))
      : null,
    response
      ? [
          h(
            'p',
            { class: 'try-status' },
            `HTTP ${response.status}`,
            response.timings_ms ? ` · ${Math.round(response.timings_ms.total)} ms` : '',
            typeof response.body_size === 'number' ? ` · ${response.body_size} bytes` : '',
            response.truncated ? ' (cut to the first 64 KiB)' : '',
          ),
          h(
            'details',
            {},
            h('summary', {}, `Response headers (${names(response.headers).length})`),
            table(
              [
                ['Name', (r) => r[0]],
                ['Value', (r) => r[1]],
              ],
              entries(response.headers || {}),
              'No headers.',
            ),
          ),
          bodyView(ed, node, area, response),
        ]
      : null,
    extracted.length
      ? h(
          'dl',
          { class: 'facts try-extracted' },
          extracted.map(([name, value]) => [h('dt', {}, name), h('dd', {}, h('code', {}, JSON.stringify(value)))]),
        )
      : null,
    assertions.length
      ? h(
          'ul',
          { class: 'assertions' },
          assertions.map((a) =>
            h(
              'li',
              { class: a.passed ? 'passed' : 'failed' },
              `${a.passed ? '✓' : '✗'} ${a.source} ${a.operator}${a.expected !== undefined && a.expected !== null ? ` ${JSON.stringify(a.expected)}` : ''}`,
              a.passed ? '' : ` (got ${JSON.stringify(a.actual)}${a.reason ? `, ${a.reason}` : ''})`,
            ),
          ),
        )
      : null,
  );
}
