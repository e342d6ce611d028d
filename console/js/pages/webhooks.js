// @ts-check
// Webhooks: the list (name, capture URL with a copy button, request count, last request), create, edit (with the
// signature verification, the response rules, the handshake and CORS), delete.

import { h, fill, field, notice, copyButton, table, ago } from '../dom.js';
import { call, all, can } from '../api.js';
import { verificationFields } from './signature.js';
import { answerFields } from './answers.js';

export async function render(main) {
  const error = notice();
  const list = h('div', {});
  const refresh = async () => {
    const hooks = await all('/webhooks');
    fill(
      list,
      table(
        [
          ['Name', (w) => h('a', { href: `#/webhooks/${w.id}` }, w.name)],
          [
            'Capture URL',
            (w) => h('span', { class: 'url' }, h('code', {}, w.capture_url), ' ', copyButton('Copy', w.capture_url)),
          ],
          ['Requests', (w) => String(w.request_count)],
          ['Last request', (w) => ago(w.last_request_at)],
          [
            '',
            (w) =>
              can('webhooks:write')
                ? h(
                    'span',
                    { class: 'row-actions' },
                    h('button', { type: 'button', class: 'small', onclick: () => edit(w, refresh) }, 'Edit'),
                    h(
                      'button',
                      { type: 'button', class: 'small danger', onclick: () => remove(w, refresh, error) },
                      'Delete',
                    ),
                  )
                : '',
          ],
        ],
        hooks,
        'No webhooks yet. Create one and point a sender at its capture URL.',
        { stacked: true },
      ),
    );
  };
  fill(
    main,
    h(
      'div',
      { class: 'page-head' },
      h('h1', {}, 'Webhooks'),
      can('webhooks:write')
        ? h(
            'button',
            { type: 'button', class: 'primary', id: 'new-webhook', onclick: () => edit(null, refresh) },
            'New webhook',
          )
        : null,
    ),
    error,
    list,
  );
  await refresh();
}

async function remove(webhook, refresh, error) {
  if (!confirm(`Delete ${webhook.name} and every request it captured?`)) return;
  try {
    await call('DELETE', `/webhooks/${webhook.id}`);
    await refresh();
  } catch (e) {
    error.show(e);
  }
}

/** The create or edit form, in a dialog. */
function edit(webhook, refresh) {
  const error = notice();
  const name = h('input', { name: 'name', required: true, maxlength: 200, value: webhook ? webhook.name : '' });
  const description = h(
    'textarea',
    { name: 'description', rows: 2 },
    webhook && webhook.description ? webhook.description : '',
  );
  const maxBody = h('input', {
    type: 'number',
    name: 'max_body_bytes',
    min: 1,
    max: 33554432,
    value: webhook ? webhook.max_body_bytes : 1048576,
  });
  const maxAge = h('input', {
    type: 'number',
    name: 'max_age_days',
    min: 1,
    value: webhook && webhook.retention.max_age_days ? webhook.retention.max_age_days : '',
  });
  const maxRequests = h('input', {
    type: 'number',
    name: 'max_requests',
    min: 1,
    value: webhook && webhook.retention.max_requests ? webhook.retention.max_requests : '',
  });
  const verification = verificationFields(webhook);
  const answers = answerFields(webhook);
  const form = h(
    'form',
    { class: 'stack' },
    error,
    field('Name', name),
    field('Description', description),
    field('Largest body (bytes)', maxBody, 'Up to 32 MiB.'),
    field('Keep captures for (days)', maxAge, 'Leave both empty to keep the current rule.'),
    field('Keep at most (requests)', maxRequests),
    verification.part,
    answers.part,
    h('button', { type: 'submit', class: 'primary' }, webhook ? 'Save' : 'Create'),
  );
  const box = h(
    'dialog',
    { 'aria-label': webhook ? 'Edit webhook' : 'New webhook' },
    h('h2', {}, webhook ? `Edit ${webhook.name}` : 'New webhook'),
    form,
    h('form', { method: 'dialog', class: 'actions' }, h('button', { type: 'submit' }, 'Cancel')),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const number = (input) => (input.value === '' ? null : Number(input.value));
    const body = {
      name: name.value.trim(),
      description: description.value.trim() || null,
      max_body_bytes: number(maxBody),
    };
    if (maxAge.value !== '' || maxRequests.value !== '') {
      body.retention = { max_age_days: number(maxAge), max_requests: number(maxRequests) };
    }
    try {
      const verifying = verification.value();
      if (verifying !== undefined) body.verification = verifying;
      Object.assign(body, answers.value());
      const saved = webhook
        ? await call('PATCH', `/webhooks/${webhook.id}`, body)
        : await call('POST', '/webhooks', body);
      box.close();
      if (webhook) await refresh();
      else location.hash = `#/webhooks/${saved.id}`;
    } catch (e) {
      error.show(e);
    }
  });
  document.body.append(box);
  box.addEventListener('close', () => box.remove());
  box.showModal();
  name.focus();
}
