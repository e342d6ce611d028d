// @ts-check
// One node as a card: its number, id and kind; Try (request nodes), Move up, Move down and Remove; a summary line;
// the fields every node has (Id, Name, Enabled, Continue on failure); its kind's form; the last try's answer.

import { h, fill } from '../dom.js';
import { textInput, checkInput, control, button } from './controls.js';
import { kindForm } from './forms.js';
import { describe } from './summary.js';
import { tryArea, tryNode } from './try.js';
import { KINDS, moveNode, removeNode } from '../lib/flow_model.js';
import { isObject } from '../lib/ordered_json.js';
import { can } from '../api.js';

/** @typedef {import('./controls.js').Editor} Editor */

const KIND_LABELS = Object.fromEntries(KINDS);

/** The fields every node has. @param {Editor} ed */
function commonFields(ed, node, onId) {
  const id = h('input', {
    type: 'text',
    value: node.id ?? '',
    spellcheck: 'false',
    class: 'code',
    required: true,
    title: 'Letters, digits, _ or -',
  });
  id.addEventListener('input', () => {
    node.id = id.value;
    onId(id.value);
    ed.changed();
  });
  return h(
    'div',
    { class: 'common-fields' },
    control('Id', id, 'id'),
    textInput(ed, 'Name', node, ['name'], { optional: true }),
    checkInput(ed, 'Enabled', node, ['enabled'], true),
    checkInput(ed, 'Continue on failure', node, ['continue_on_failure'], false),
  );
}

/**
 * The card of the node at `index` of `count`.
 * @param {Editor} ed
 */
export function card(ed, node, index, count) {
  const object = isObject(node);
  const headingId = `node-heading-${index}`;
  const idText = h('code', {}, object ? String(node.id ?? '') : '');
  const li = h('li', { class: 'editor-card', 'aria-labelledby': headingId });
  li.dataset.node = object ? String(node.id ?? '') : '';
  const summary = h('div', { class: 'card-summary' });
  const refresh = () => fill(summary, describe(node, ed.lookups));
  /** @type {any} */ (li).refreshSummary = refresh;
  const move = (to, control) => {
    if (!moveNode(ed.definition, index, to)) return;
    ed.changed();
    ed.rebuild(() => {
      const moved = document.querySelectorAll('#editor-cards > li')[to];
      const wanted = moved && moved.querySelector(`[data-action=${control}]`);
      return wanted && !wanted.hasAttribute('disabled')
        ? wanted
        : moved && moved.querySelector('[data-action=up]:enabled, [data-action=down]:enabled');
    });
  };
  const remove = () => {
    removeNode(ed.definition, index);
    ed.changed();
    ed.announce(`Removed node ${object ? node.id : index + 1}.`, () => {
      ed.definition.nodes.splice(index, 0, node);
      ed.changed();
      ed.rebuild(() => document.querySelectorAll('#editor-cards > li')[index]?.querySelector('input'));
    });
    ed.rebuild(() => document.getElementById('add-node'));
  };
  // Trying sends the request now: it takes the scope of a launch.
  const area = object && node.kind === 'request' && can('flows:execute') ? tryArea(ed, node) : null;
  const actions = h(
    'div',
    { class: 'card-actions' },
    area ? button('Try', () => tryNode(ed, node, index, area), { action: 'try', class: 'small primary-ghost' }) : null,
    button('Move up', () => move(index - 1, 'up'), { action: 'up', disabled: index === 0 }),
    button('Move down', () => move(index + 1, 'down'), { action: 'down', disabled: index === count - 1 }),
    button('Remove', remove, { action: 'remove', class: 'small danger' }),
  );
  const kind = object ? KIND_LABELS[node.kind] || String(node.kind) : 'not an object';
  fill(
    li,
    h(
      'div',
      { class: 'card-head' },
      h('h3', { id: headingId }, `${index + 1}. `, idText, ' ', h('span', { class: 'kind' }, kind)),
      actions,
    ),
    summary,
    h('div', { class: 'card-problems', 'data-field': '' }),
    object
      ? h(
          'div',
          { class: 'card-body' },
          commonFields(ed, node, (id) => {
            li.dataset.node = id;
            idText.textContent = id;
          }),
          kindForm(ed, node),
        )
      : null,
    area,
  );
  refresh();
  return li;
}
