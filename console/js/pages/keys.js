// @ts-check
// API keys: create from a preset with the scopes as checkboxes to review, an expiry preselected, the secret shown
// once with a copy button; the list with last use; delete.

import { h, fill, field, notice, table, when, ago, copyButton } from '../dom.js';
import { call, all, can } from '../api.js';

export async function render(main) {
  const error = notice();
  const list = h('div', { id: 'keys' });
  const load = async () => {
    const keys = await all('/api-keys');
    fill(
      list,
      table(
        [
          ['Name', (k) => k.name],
          ['Key', (k) => h('code', {}, `${k.prefix}…`)],
          ['Scopes', (k) => k.scopes.join(' ')],
          ['Expires', (k) => when(k.expires_at)],
          ['Last used', (k) => ago(k.last_used_at)],
          [
            '',
            (k) =>
              can('keys:write')
                ? h(
                    'button',
                    {
                      type: 'button',
                      class: 'small danger',
                      onclick: async () => {
                        if (!confirm(`Delete the key ${k.name}? Anything using it stops at once.`)) return;
                        try {
                          await call('DELETE', `/api-keys/${k.id}`);
                          await load();
                        } catch (e) {
                          error.show(e);
                        }
                      },
                    },
                    'Delete',
                  )
                : '',
          ],
        ],
        keys,
        'No keys yet.',
        { stacked: true },
      ),
    );
  };
  fill(
    main,
    h(
      'div',
      { class: 'page-head' },
      h('h1', {}, 'API keys'),
      can('keys:write')
        ? h('button', { type: 'button', class: 'primary', id: 'new-key', onclick: () => create(load) }, 'New key')
        : null,
    ),
    error,
    list,
  );
  await load();
}

async function create(reload) {
  const permissions = await call('GET', '/permissions');
  const error = notice();
  const name = h('input', { required: true, maxlength: 200 });
  const preset = h(
    'select',
    {},
    h('option', { value: '' }, 'choose scopes below'),
    permissions.presets.map((p) => h('option', { value: p.name }, `${p.name}: ${p.description}`)),
  );
  const boxes = permissions.scopes.map((s) =>
    h('input', { type: 'checkbox', value: s.scope, id: `scope-${s.scope.replace(':', '-')}` }),
  );
  preset.addEventListener('change', () => {
    const chosen = permissions.presets.find((p) => p.name === preset.value);
    boxes.forEach((box) => {
      box.checked = Boolean(chosen && chosen.scopes.includes(box.value));
    });
  });
  const expiry = h(
    'select',
    {},
    [
      ['30', '30 days'],
      ['90', '90 days'],
      ['365', 'one year'],
      ['7', '7 days'],
    ].map(([d, label]) => h('option', { value: d }, label)),
  );
  const scopes = h(
    'fieldset',
    {},
    h('legend', {}, 'Scopes'),
    permissions.scopes.map((s, i) =>
      h(
        'div',
        { class: 'check' },
        boxes[i],
        h('label', { for: boxes[i].id }, h('code', {}, s.scope), ' ', s.description),
      ),
    ),
  );
  const form = h(
    'form',
    { class: 'stack' },
    error,
    field('Name', name),
    field('Preset', preset),
    scopes,
    field('Expires in', expiry),
    h('button', { type: 'submit', class: 'primary' }, 'Create key'),
  );
  const box = h(
    'dialog',
    { 'aria-label': 'New API key' },
    h('h2', {}, 'New API key'),
    form,
    h('form', { method: 'dialog', class: 'actions' }, h('button', { type: 'submit' }, 'Close')),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const chosen = boxes.filter((b) => b.checked).map((b) => b.value);
    if (!chosen.length) {
      error.show('Choose at least one scope.');
      return;
    }
    const expiresAt = new Date(Date.now() + Number(expiry.value) * 86400000).toISOString();
    try {
      const created = await call('POST', '/api-keys', {
        name: name.value.trim(),
        scopes: chosen,
        expires_at: expiresAt,
      });
      // The secret exists only in this answer: shown once, then gone with the dialog.
      fill(
        form,
        h('p', {}, 'Copy the key now: it is not shown again.'),
        h(
          'p',
          {},
          h('code', { id: 'new-key-secret', class: 'secret' }, created.key),
          ' ',
          copyButton('Copy', created.key),
        ),
      );
      await reload();
    } catch (e) {
      error.show(e);
    }
  });
  document.body.append(box);
  box.addEventListener('close', () => box.remove());
  box.showModal();
}
