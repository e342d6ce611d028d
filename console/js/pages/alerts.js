// @ts-check
// Alerts: the organization's notification channels (email, Slack, signed webhook) with a "Send test" button and
// each one's last delivery, the form that adds one (a webhook channel's signing secret is shown once), and the
// alert history.

import { h, fill, field, notice, table, badge, when, copyButton } from '../dom.js';
import { call, can } from '../api.js';

/** A channel's last delivery in words. */
function lastDelivery(c) {
  const d = c.last_delivery;
  if (!d) return h('span', { class: 'muted' }, 'never sent');
  return d.ok ? [badge('ok'), ' ', when(d.at)] : [badge('failed'), ' ', when(d.at), ' ', d.error || ''];
}

/** Renders the alerts page into `main`. */
export async function render(main) {
  const [channels, alerts] = await Promise.all([call('GET', '/notification-channels'), call('GET', '/alerts')]);
  const error = notice();
  const writable = can('organization:write');
  const reload = () => render(main);
  const names = new Map(channels.items.map((c) => [c.id, c.name]));
  const act = async (method, path) => {
    try {
      await call(method, path);
      await reload();
    } catch (e) {
      error.show(e);
    }
  };
  const channelRows = table(
    [
      ['Name', (c) => c.name],
      ['Kind', (c) => badge(c.kind)],
      ['Sends to', (c) => h('code', {}, c.address || c.url)],
      ['Last delivery', lastDelivery],
      [
        'Actions',
        (c) =>
          writable
            ? [
                h(
                  'button',
                  {
                    type: 'button',
                    class: 'send-test',
                    onclick: () => act('POST', `/notification-channels/${c.id}/test`),
                  },
                  'Send test',
                ),
                ' ',
                h(
                  'button',
                  {
                    type: 'button',
                    class: 'danger',
                    onclick: () =>
                      confirm(`Delete the channel ${c.name}? Schedules stop notifying it.`) &&
                      act('DELETE', `/notification-channels/${c.id}`),
                  },
                  'Delete',
                ),
              ]
            : null,
      ],
    ],
    channels.items,
    'No notification channels.',
  );
  const history = table(
    [
      ['When', (a) => when(a.at)],
      ['Alert', (a) => h('code', {}, a.type)],
      ['Channels', (a) => a.channel_ids.map((id) => names.get(id) || 'deleted channel').join(', ')],
      ['Outcome', (a) => badge(a.outcome || 'sending')],
    ],
    alerts.items,
    'No alerts yet.',
  );
  fill(
    main,
    h('h1', {}, 'Alerts'),
    error,
    h('h2', {}, 'Notification channels'),
    channelRows,
    writable ? channelForm(reload) : null,
    h('h2', {}, 'Alert history'),
    history,
  );
}

/** The form that adds a channel. */
function channelForm(done) {
  const error = notice();
  const shown = h('div', {});
  const name = h('input', { id: 'channel-name', required: true });
  const kind = h(
    'select',
    { id: 'channel-kind' },
    h('option', { value: 'slack' }, 'Slack (incoming webhook URL)'),
    h('option', { value: 'webhook' }, 'Webhook (signed, Standard Webhooks)'),
    h('option', { value: 'email' }, 'Email'),
  );
  const target = h('input', { id: 'channel-target', required: true, placeholder: 'https://…' });
  kind.addEventListener('change', () => {
    target.setAttribute('placeholder', kind.value === 'email' ? 'oncall@example.com' : 'https://…');
  });
  const form = h(
    'form',
    { class: 'stack', id: 'channel-form' },
    h('h3', {}, 'New channel'),
    error,
    shown,
    field('Name', name),
    field('Kind', kind),
    field('URL or address', target),
    h('button', { type: 'submit', class: 'primary' }, 'Add channel'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const body = { name: name.value, kind: kind.value };
    if (kind.value === 'email') body.address = target.value;
    else body.url = target.value;
    try {
      const made = await call('POST', '/notification-channels', body);
      if (made.signing_secret) {
        fill(
          shown,
          h(
            'p',
            { class: 'notice' },
            'Signing secret (shown once): ',
            h('code', {}, made.signing_secret),
            ' ',
            copyButton('Copy', made.signing_secret),
          ),
          h('button', { type: 'button', onclick: () => done() }, 'Done'),
        );
        return;
      }
      await done();
    } catch (e) {
      error.show(e);
    }
  });
  return form;
}
