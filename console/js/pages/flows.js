// @ts-check
// Flows: the list with tags and last status, a tag filter, and creating a flow (a name and its first request: a
// flow needs a node, so the dialog asks for the first request's method and URL and opens the editor on it).

import { h, fill, field, notice, table, badge, when } from '../dom.js';
import { call, all, can } from '../api.js';
import { newNode, METHODS } from '../lib/flow_model.js';

export async function render(main) {
  const error = notice();
  const list = h('div', {});
  const tag = h('select', { 'aria-label': 'Tag' }, h('option', { value: '' }, 'every tag'));
  const load = async () => {
    const flows = await all(`/flows${tag.value ? `?tag=${encodeURIComponent(tag.value)}` : ''}`);
    fill(
      list,
      table(
        [
          ['Name', (f) => h('a', { href: `#/flows/${f.id}` }, f.name)],
          ['Tags', (f) => f.tags.map((t) => h('span', { class: 'tag' }, t))],
          ['Last run', (f) => (f.last_status ? badge(f.last_status) : h('span', { class: 'muted' }, 'never run'))],
          ['Published', (f) => (f.published_version ? `v${f.published_version}` : 'draft only')],
          ['Updated', (f) => when(f.updated_at)],
        ],
        flows,
        'No flows yet.',
      ),
    );
  };
  tag.addEventListener('change', () => load().catch((e) => error.show(e)));
  const tags = await call('GET', '/flows/tags');
  tags.items.forEach((t) => tag.append(h('option', { value: t.tag }, `${t.tag} (${t.count})`)));
  fill(
    main,
    h(
      'div',
      { class: 'page-head' },
      h('h1', {}, 'Flows'),
      tag,
      can('flows:write')
        ? h('button', { type: 'button', class: 'primary', id: 'new-flow', onclick: create }, 'New flow')
        : null,
    ),
    error,
    list,
  );
  await load();
}

function create() {
  const error = notice();
  const name = h('input', { required: true, maxlength: 200 });
  const method = h(
    'select',
    {},
    METHODS.map((m) => h('option', { value: m }, m)),
  );
  const url = h('input', {
    required: true,
    spellcheck: 'false',
    class: 'code',
    placeholder: 'https://api.example.com/health or {{base_url}}/health',
  });
  const form = h(
    'form',
    { class: 'stack' },
    error,
    field('Name', name),
    h(
      'fieldset',
      { class: 'stack' },
      h('legend', {}, 'First request'),
      field('Method', method),
      field('URL', url, 'More nodes are added in the editor.'),
    ),
    h('button', { type: 'submit', class: 'primary' }, 'Create'),
  );
  const box = h(
    'dialog',
    { 'aria-label': 'New flow' },
    h('h2', {}, 'New flow'),
    form,
    h('form', { method: 'dialog', class: 'actions' }, h('button', { type: 'submit' }, 'Cancel')),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      const first = newNode('request', new Set(), { method: method.value, url: url.value.trim() });
      const flow = await call('POST', '/flows', { name: name.value.trim(), definition: { nodes: [first] } });
      box.close();
      location.hash = `#/flows/${flow.id}`;
    } catch (e) {
      error.show(e);
    }
  });
  document.body.append(box);
  box.addEventListener('close', () => box.remove());
  box.showModal();
}
