// @ts-check
// "Add node": a menu of the kinds (Request, Webhook, Delay, Module, Set variables) and "From a collection", which
// asks for a collection and one of its requests and adds a request node that uses it (`request_ref`). The menu
// opens on Enter or Space with its first item focused; arrows move; Escape closes it.

import { h, fill, field, notice } from '../dom.js';
import { all } from '../api.js';
import { KINDS, newNode, refNode, addNode, idsOf } from '../lib/flow_model.js';

/** @typedef {import('./controls.js').Editor} Editor */

/** Adds `node` and focuses its card's first control. @param {Editor} ed */
function added(ed, node) {
  const index = addNode(ed.definition, node);
  ed.changed();
  ed.rebuild(() => {
    const cardEl = document.querySelectorAll('#editor-cards > li')[index];
    const first =
      cardEl && (cardEl.querySelector('[data-field="request.url"]') || cardEl.querySelector('.card-body input'));
    if (cardEl) cardEl.scrollIntoView({ block: 'nearest' });
    return first;
  });
}

/** The dialog that adds a collection request as a node. @param {Editor} ed */
async function fromCollection(ed, opener) {
  const error = notice();
  const collection = h('select', { required: true }, h('option', { value: '' }, 'Choose a collection'));
  const request = h(
    'select',
    { required: true, disabled: true },
    h('option', { value: '' }, 'Choose a collection first'),
  );
  const form = h(
    'form',
    { class: 'stack' },
    error,
    field('Collection', collection),
    field('Request', request),
    h('button', { type: 'submit', class: 'primary' }, 'Add'),
  );
  const box = h(
    'dialog',
    { 'aria-label': 'From a collection', id: 'from-collection' },
    h('h2', {}, 'A request from a collection'),
    form,
    h('form', { method: 'dialog', class: 'actions' }, h('button', { type: 'submit' }, 'Cancel')),
  );
  let detail = null;
  collection.addEventListener('change', async () => {
    detail = null;
    request.disabled = true;
    fill(request, h('option', { value: '' }, 'Loading…'));
    if (!collection.value) return;
    try {
      detail = await ed.lookups.loadCollection(collection.value);
      fill(
        request,
        h('option', { value: '' }, 'Choose a request'),
        detail.requests.map((r) => h('option', { value: r.id }, `${r.method} ${r.name}`)),
      );
      request.disabled = false;
    } catch (e) {
      error.show(e);
    }
  });
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const chosen = detail && detail.requests.find((r) => r.id === request.value);
    if (!chosen) return error.show('Choose a collection and one of its requests.');
    box.close();
    added(ed, refNode(detail.id, chosen, idsOf(ed.definition)));
  });
  document.body.append(box);
  box.addEventListener('close', () => {
    box.remove();
    if (!box.returnValue && document.activeElement === document.body) opener.focus();
  });
  box.showModal();
  try {
    const collections = await all('/collections');
    collection.append(...collections.map((c) => h('option', { value: c.id }, c.name)));
    if (!collections.length)
      error.show('No collections yet: import an OpenAPI description on the Collections page.', 'info');
  } catch (e) {
    error.show(e);
  }
}

/** The "Add node" button and its menu. @param {Editor} ed */
export function addMenu(ed) {
  const opener = h(
    'button',
    { type: 'button', id: 'add-node', 'aria-expanded': 'false', 'aria-controls': 'add-node-menu' },
    'Add node',
  );
  const close = (focus = true) => {
    menu.hidden = true;
    opener.setAttribute('aria-expanded', 'false');
    if (focus) opener.focus();
  };
  const item = (label, run) =>
    h(
      'li',
      {},
      h(
        'button',
        {
          type: 'button',
          class: 'menu-item',
          onclick: () => {
            close(false);
            run();
          },
        },
        label,
      ),
    );
  const menu = h(
    'ul',
    { id: 'add-node-menu', class: 'add-menu', hidden: true, 'aria-label': 'Node kinds' },
    KINDS.map(([kind, label]) => item(label, () => added(ed, newNode(kind, idsOf(ed.definition))))),
    item('From a collection', () => fromCollection(ed, opener)),
  );
  const items = () => [...menu.querySelectorAll('button')];
  opener.addEventListener('click', () => {
    const open = menu.hidden;
    menu.hidden = !open;
    opener.setAttribute('aria-expanded', String(open));
    if (open) items()[0].focus();
  });
  menu.addEventListener('keydown', (event) => {
    const list = items();
    const at = list.indexOf(/** @type {HTMLButtonElement} */ (document.activeElement));
    if (event.key === 'Escape') close();
    else if (event.key === 'ArrowDown') list[(at + 1) % list.length].focus();
    else if (event.key === 'ArrowUp') list[(at - 1 + list.length) % list.length].focus();
    else return;
    event.preventDefault();
  });
  menu.addEventListener('focusout', (event) => {
    const to = /** @type {Node | null} */ (event.relatedTarget);
    if (to && !menu.contains(to) && to !== opener) close(false);
  });
  return h('div', { class: 'add-node' }, opener, menu);
}
