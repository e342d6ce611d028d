// @ts-check
// Administration: runners (online or offline, labels, host metrics), the audit log and the organization's settings.

import { h, fill, field, notice, table, when, ago, badge, bytes } from '../dom.js';
import { call, all, can } from '../api.js';

export async function renderRunners(main) {
  const error = notice();
  const [runners, pools] = await Promise.all([
    all('/runners'),
    call('GET', '/runner/pools').then(
      (answer) => answer.items,
      () => [],
    ),
  ]);
  fill(
    main,
    h('h1', {}, 'Runners'),
    error,
    h('h2', {}, 'Pools'),
    table(
      [
        ['Pool', (p) => h('code', {}, p.pool)],
        ['Labels', (p) => (p.labels.length ? p.labels.map((l) => h('span', { class: 'tag' }, l)) : 'any runner')],
        ['Backlog', (p) => String(p.queued)],
        ['Oldest wait', (p) => (p.queued ? `${Math.round(p.oldest_queued_s)} s` : '—')],
        ['Runners', (p) => String(p.runners_online)],
        ['Busy slots', (p) => `${p.busy_slots} of ${p.busy_slots + p.idle_slots}`],
      ],
      pools,
      'No pools (the server declares them with --runner-pool).',
    ),
    h('h2', {}, 'Runners'),
    table(
      [
        ['Name', (r) => r.name],
        ['Status', (r) => badge(r.status)],
        ['Labels', (r) => r.labels.map((l) => h('span', { class: 'tag' }, l))],
        ['Jobs', (r) => String(r.running_jobs)],
        [
          'Host',
          (r) =>
            r.host
              ? `${r.host.hostname} · ${r.host.os}/${r.host.arch} · ${r.host.cpus} CPUs · ${bytes(r.host.memory_bytes)}`
              : '—',
        ],
        [
          'Load',
          (r) => (r.metrics ? `${r.metrics.cpu_percent.toFixed(0)}% CPU · ${bytes(r.metrics.memory_used_bytes)}` : '—'),
        ],
        ['Last seen', (r) => ago(r.last_seen_at)],
        [
          '',
          (r) =>
            can('runners:write')
              ? h(
                  'button',
                  {
                    type: 'button',
                    class: 'small danger',
                    onclick: async () => {
                      try {
                        await call('DELETE', `/runners/${r.id}`);
                        await renderRunners(main);
                      } catch (e) {
                        error.show(e);
                      }
                    },
                  },
                  'Remove',
                )
              : '',
        ],
      ],
      runners,
      'No runners have registered. Start hookflow-runner with a key that holds runner:complete.',
    ),
  );
}

export async function renderAudit(main) {
  const entries = await all('/audit-log', 500);
  fill(
    main,
    h('h1', {}, 'Audit log'),
    table(
      [
        ['When', (e) => when(e.created_at)],
        ['Action', (e) => h('code', {}, e.action)],
        ['Actor', (e) => e.actor],
        ['Target', (e) => e.target],
        ['Details', (e) => h('code', { class: 'muted' }, JSON.stringify(e.details))],
      ],
      entries,
      'Nothing recorded yet.',
    ),
  );
}

export async function renderSettings(main) {
  const org = await call('GET', '/organization');
  const error = notice();
  const write = can('organization:write');
  const name = h('input', { value: org.name, required: true, disabled: !write });
  const maxAge = h('input', {
    type: 'number',
    min: 1,
    value: org.default_retention.max_age_days ?? '',
    disabled: !write,
  });
  const maxRequests = h('input', {
    type: 'number',
    min: 1,
    value: org.default_retention.max_requests ?? '',
    disabled: !write,
  });
  const maxBody = h('input', { type: 'number', min: 1, value: org.default_max_body_bytes, disabled: !write });
  const rate = h('input', { type: 'number', min: 1, value: org.capture_rate_limit_per_s, disabled: !write });
  const form = h(
    'form',
    { class: 'stack card' },
    error,
    field('Name', name),
    field('Default retention (days)', maxAge),
    field('Default retention (requests)', maxRequests),
    field('Default largest body (bytes)', maxBody),
    field('Capture rate limit per endpoint (per second)', rate),
    h(
      'p',
      { class: 'muted' },
      org.private_network
        ? 'The operator lets this organization reach private networks from the server.'
        : 'Requests the server makes for this organization reach public addresses only.',
    ),
    write ? h('button', { type: 'submit', class: 'primary' }, 'Save') : null,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const number = (input) => (input.value === '' ? null : Number(input.value));
    try {
      await call('PATCH', '/organization', {
        name: name.value.trim(),
        default_max_body_bytes: number(maxBody),
        capture_rate_limit_per_s: number(rate),
        default_retention: { max_age_days: number(maxAge), max_requests: number(maxRequests) },
      });
      error.show('Saved.', 'info');
    } catch (e) {
      error.show(e);
    }
  });
  fill(
    main,
    h('h1', {}, 'Organization settings'),
    h('p', { class: 'muted' }, `Created ${new Date(org.created_at).toLocaleString()} · id `, h('code', {}, org.id)),
    form,
  );
}
