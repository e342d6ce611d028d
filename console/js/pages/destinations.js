// @ts-check
// An endpoint's destinations on its page (issue #49): where its captures are delivered, each with its status
// (enabled, or disabled and why), enable/disable, delete, its dead letters with a replay of all of them; and a
// form to add one (name, URL, search, Standard Webhooks signing: the secret is shown once, here).

import { h, fill, field, notice, table, badge, when, copyButton } from '../dom.js';
import { call, can } from '../api.js';

/** The most destinations an endpoint holds (the API's limit). */
const MAX = 10;

/** A destination's state as a badge and, when disabled, why. */
function state(d) {
  if (d.enabled) return badge('enabled');
  return [badge('disabled'), d.disabled_reason ? h('div', { class: 'muted' }, d.disabled_reason) : null];
}

/** A destination's dead deliveries, newest first, with a replay of all of them. */
async function deadLetters(box, webhookId, d, refresh) {
  const base = `/webhooks/${webhookId}/destinations/${d.id}`;
  const page = await call('GET', `${base}/deliveries?status=dead&limit=50`);
  const message = notice();
  const replay = h(
    'button',
    { type: 'button', class: 'small', disabled: !page.items.length || !can('webhooks:write') },
    'Replay all dead',
  );
  replay.addEventListener('click', async () => {
    try {
      const done = await call('POST', `${base}/deliveries/replay`, { status: 'dead' });
      message.show(`${done.replayed} deliveries replayed.`, 'ok');
      await refresh();
    } catch (e) {
      message.show(e);
    }
  });
  fill(
    box,
    h('h4', {}, `Dead letters of ${d.name}`),
    table(
      [
        ['Request', (x) => h('code', {}, x.request_id)],
        ['Attempts', (x) => String(x.attempts)],
        [
          'Last attempt',
          (x) => (x.last_attempt ? `${x.last_attempt.status_code ?? ''} ${x.last_attempt.error ?? ''}` : '—'),
        ],
        ['When', (x) => (x.last_attempt ? when(x.last_attempt.at) : '—')],
      ],
      page.items,
      'No dead deliveries.',
      { stacked: true },
    ),
    replay,
    message,
  );
}

/** The form that adds a destination; `onMade` receives what the API answered (with the secret, once). */
function creation(webhookId, onMade) {
  const name = h('input', { name: 'name', required: true, placeholder: 'billing' });
  const url = h('input', { name: 'url', required: true, type: 'url', placeholder: 'https://consumer.example/hooks' });
  const q = h('input', { name: 'q', placeholder: 'header.x-event:paid (empty: every capture)' });
  const signing = h('input', { name: 'signing', type: 'checkbox' });
  const message = notice();
  const form = h(
    'form',
    { class: 'stack destination-form' },
    h('h4', {}, 'Add a destination'),
    field('Name', name),
    field('URL', url, "Each capture's sub-path and query are appended."),
    field('Search', q, 'Only captures matching this are delivered.'),
    h('label', {}, signing, ' Sign deliveries (Standard Webhooks)'),
    h('button', { type: 'submit' }, 'Add destination'),
    message,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const body = { name: name.value, url: url.value };
    if (q.value.trim()) body.q = q.value.trim();
    if (signing.checked) body.signing = 'standard-webhooks';
    try {
      const made = await call('POST', `/webhooks/${webhookId}/destinations`, body);
      form.reset();
      message.show('');
      onMade(made);
    } catch (e) {
      message.show(e);
    }
  });
  return form;
}

/** Fills `section` with the endpoint's destinations, their controls and the form. */
export async function showDestinations(section, webhook) {
  const webhookId = webhook.id;
  const letters = h('div', { class: 'dead-letters' });
  const secret = h('div', { class: 'secret-once' });
  const refresh = async () => {
    const page = await call('GET', `/webhooks/${webhookId}/destinations`);
    const writer = can('webhooks:write');
    const act = (d, label, run) =>
      h(
        'button',
        {
          type: 'button',
          class: 'small',
          disabled: !writer,
          onclick: () =>
            run()
              .then(refresh)
              .catch((e) => alert(e.message)),
        },
        label,
      );
    fill(
      section,
      h('h3', {}, 'Destinations'),
      table(
        [
          ['Name', (d) => d.name],
          ['URL', (d) => h('code', {}, d.url)],
          ['Search', (d) => (d.q ? h('code', {}, d.q) : 'every capture')],
          ['Signing', (d) => d.signing || '—'],
          ['Status', state],
          [
            '',
            (d) => [
              act(d, d.enabled ? 'Disable' : 'Enable', () =>
                call('PATCH', `/webhooks/${webhookId}/destinations/${d.id}`, { enabled: !d.enabled }),
              ),
              h(
                'button',
                { type: 'button', class: 'small', onclick: () => deadLetters(letters, webhookId, d, refresh) },
                'Dead letters',
              ),
              act(d, 'Delete', () => call('DELETE', `/webhooks/${webhookId}/destinations/${d.id}`)),
            ],
          ],
        ],
        page.items,
        'No destinations: captures are kept, not delivered.',
        { stacked: true },
      ),
      secret,
      letters,
      writer && page.items.length < MAX
        ? creation(webhookId, (made) => {
            fill(
              secret,
              made.signing_secret
                ? h(
                    'p',
                    { class: 'notice notice-ok' },
                    'Signing secret (shown once): ',
                    h('code', {}, made.signing_secret),
                    ' ',
                    copyButton('Copy', made.signing_secret),
                  )
                : null,
            );
            refresh().catch(() => {});
          })
        : null,
    );
  };
  await refresh();
}

/** The facts line of a capture's deliveries: each destination's delivery and its status. */
export function captureDeliveries(capture) {
  const deliveries = capture.deliveries || [];
  if (!deliveries.length) return null;
  return h(
    'div',
    { class: 'deliveries' },
    'Deliveries: ',
    deliveries.map((d) =>
      h('span', { title: `delivery ${d.delivery_id} to destination ${d.destination_id}` }, badge(d.status), ' '),
    ),
  );
}
