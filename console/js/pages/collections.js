// @ts-check
// Collections: the list, importing an OpenAPI description (pasted or by URL), one collection's requests by folder,
// and keeping it in step with its description: the sync preview as a diff, then its apply; a mock of it (an endpoint
// answering each operation with its example).

import { h, fill, field, notice, table, when } from '../dom.js';
import { call, all, can } from '../api.js';
import { importToolDialog } from './import_dialog.js';

export async function render(main) {
  const error = notice();
  const collections = await all('/collections');
  fill(
    main,
    h(
      'div',
      { class: 'page-head' },
      h('h1', {}, 'Collections'),
      can('collections:write')
        ? h(
            'button',
            { type: 'button', class: 'primary', id: 'import-openapi', onclick: importDialog },
            'Import OpenAPI',
          )
        : null,
      can('collections:write')
        ? h('button', { type: 'button', id: 'import-tool', onclick: importToolDialog }, 'Import from another tool')
        : null,
    ),
    error,
    table(
      [
        ['Name', (c) => h('a', { href: `#/collections/${c.id}` }, c.name)],
        ['Requests', (c) => String(c.request_count)],
        ['Updated', (c) => when(c.updated_at)],
      ],
      collections,
      'No collections yet. Import an OpenAPI description to start one.',
    ),
  );
}

function importDialog() {
  const error = notice();
  const name = h('input', { maxlength: 200 });
  const url = h('input', { type: 'url', placeholder: 'https://api.example.com/openapi.yaml' });
  const documentText = h('textarea', { rows: 10, class: 'code', placeholder: 'or paste the JSON or YAML description' });
  const form = h(
    'form',
    { class: 'stack' },
    error,
    field('Name (optional)', name),
    field('Description URL', url),
    field('Description text', documentText),
    h('button', { type: 'submit', class: 'primary' }, 'Import'),
  );
  const box = h(
    'dialog',
    { 'aria-label': 'Import OpenAPI' },
    h('h2', {}, 'Import an OpenAPI description'),
    form,
    h('form', { method: 'dialog', class: 'actions' }, h('button', { type: 'submit' }, 'Cancel')),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const source = documentText.value.trim() ? { document: documentText.value } : { url: url.value.trim() };
    try {
      const imported = await call('POST', '/collections/import/openapi', {
        name: name.value.trim() || undefined,
        source,
      });
      location.hash = `#/collections/${imported.collection.id}`;
      box.close();
    } catch (e) {
      error.show(e);
    }
  });
  document.body.append(box);
  box.addEventListener('close', () => box.remove());
  box.showModal();
}

export async function renderOne(main, [collectionId]) {
  const detail = await call('GET', `/collections/${collectionId}`);
  const error = notice();
  const byFolder = new Map();
  for (const request of detail.requests) {
    const folder = request.folder || '(no folder)';
    if (!byFolder.has(folder)) byFolder.set(folder, []);
    byFolder.get(folder).push(request);
  }
  const sync = h('section', { id: 'sync', 'aria-label': 'OpenAPI sync' });
  fill(
    main,
    h('p', {}, h('a', { href: '#/collections' }, '← Collections')),
    h(
      'div',
      { class: 'page-head' },
      h('h1', {}, detail.name),
      can('webhooks:write')
        ? h(
            'button',
            { type: 'button', id: 'create-mock', onclick: () => createMock(collectionId, error) },
            'Create mock',
          )
        : null,
    ),
    error,
    Object.keys(detail.variables).length
      ? h(
          'p',
          { class: 'muted' },
          'Variables: ',
          Object.entries(detail.variables)
            .map(([k, v]) => `${k} = ${v}`)
            .join(', '),
        )
      : null,
    sync,
    [...byFolder.entries()].map(([folder, requests]) =>
      h(
        'section',
        { class: 'folder' },
        h('h2', {}, folder),
        table(
          [
            ['Method', (r) => h('span', { class: `method method-${r.method.toLowerCase()}` }, r.method)],
            ['Name', (r) => [r.name, r.deprecated ? h('span', { class: 'tag' }, 'deprecated') : null]],
            ['URL', (r) => h('code', {}, r.url)],
          ],
          requests,
        ),
      ),
    ),
  );
  await showSync(sync, collectionId, () => renderOne(main, [collectionId]));
}

/** Makes a mock of the collection and opens its endpoint. */
async function createMock(collectionId, error) {
  try {
    const endpoint = await call('POST', `/collections/${collectionId}/mock`, {});
    location.hash = `#/webhooks/${endpoint.id}`;
  } catch (e) {
    error.show(e);
  }
}

async function showSync(el, collectionId, reload) {
  let state;
  try {
    state = await call('GET', `/collections/${collectionId}/openapi-sync`);
  } catch {
    return fill(el);
  }
  const error = notice();
  const diff = h('div', { id: 'sync-diff' });
  const preview = async () => {
    try {
      const d = await call('POST', `/collections/${collectionId}/openapi-sync/preview`);
      const line = (sign, item) =>
        h(
          'li',
          { class: `diff-${sign === '+' ? 'added' : sign === '-' ? 'removed' : 'modified'}` },
          `${sign} ${item.operation_key} (${item.name})`,
          item.changes && item.changes.length ? ` [${item.changes.join(', ')}]` : '',
        );
      fill(
        diff,
        h(
          'ul',
          { class: 'diff' },
          d.added.map((i) => line('+', i)),
          d.modified.map((i) => line('~', i)),
          d.removed.map((i) => line('-', i)),
        ),
        h('p', { class: 'muted' }, `${d.unchanged.length} unchanged`),
        can('collections:write')
          ? h('button', { type: 'button', class: 'primary', id: 'apply-sync', onclick: apply }, 'Apply')
          : null,
      );
    } catch (e) {
      error.show(e);
    }
  };
  const apply = async () => {
    try {
      await call('POST', `/collections/${collectionId}/openapi-sync`);
      await reload();
    } catch (e) {
      error.show(e);
    }
  };
  fill(
    el,
    h('h2', {}, 'OpenAPI sync'),
    error,
    h(
      'p',
      { class: 'muted' },
      `Source: ${state.source.url || 'a pasted document'} · last synced ${state.last_synced_at ? new Date(state.last_synced_at).toLocaleString() : 'never'} · ${state.status}`,
    ),
    h('button', { type: 'button', id: 'preview-sync', onclick: preview }, 'Preview sync'),
    diff,
  );
}
