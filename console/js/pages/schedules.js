// @ts-check
// A flow's schedules: the list (cron, zone, state, next fire times shown in the schedule's own zone), pause and
// resume, delete, changing whom each alerts, and the form that creates one with a live preview of its fire times in
// the chosen zone and the notification channels to alert.

import { h, fill, field, notice, table, badge } from '../dom.js';
import { call, can } from '../api.js';
import { describeNotify, notifyControls, notifyEditor } from './schedule_notify.js';

/** A fire time (RFC 3339 with its offset) as the wall clock of `zone` shows it, with the zone named. */
export function inZone(text, zone) {
  try {
    const format = new Intl.DateTimeFormat(undefined, {
      timeZone: zone,
      dateStyle: 'medium',
      timeStyle: 'short',
    });
    return `${format.format(new Date(text))} (${zone})`;
  } catch {
    return text;
  }
}

/** `name=value` lines into an object. */
function parseVariables(text) {
  const vars = {};
  for (const line of text.split('\n')) {
    const at = line.indexOf('=');
    if (at > 0) vars[line.slice(0, at).trim()] = line.slice(at + 1);
  }
  return vars;
}

function zones() {
  try {
    // @ts-ignore: newer than the checked library definitions.
    return Intl.supportedValuesOf('timeZone');
  } catch {
    return ['UTC', 'Europe/Paris', 'Europe/London', 'America/New_York', 'Asia/Tokyo'];
  }
}

/** Renders the schedules section of a flow into `el`. */
export async function showSchedules(el, flowId, environments) {
  const listed = await call('GET', `/flows/${flowId}/schedules`);
  const error = notice();
  const writable = can('flows:write');
  const reload = () => showSchedules(el, flowId, environments);
  const editor = h('div', { id: 'schedule-notify-editor' });
  const editNotify = (s) => {
    fill(
      editor,
      notifyEditor(flowId, s, reload, () => fill(editor)),
    );
    editor.scrollIntoView({ block: 'nearest' });
  };
  const act = async (method, path, body) => {
    try {
      await call(method, path, body);
      await reload();
    } catch (e) {
      error.show(e);
    }
  };
  const rows = table(
    [
      ['Cron', (s) => h('code', {}, s.cron)],
      ['Zone', (s) => s.timezone],
      [
        'Runs',
        (s) => [
          s.environment ? `env ${s.environment}` : 'no environment',
          ', ',
          s.version === null ? 'draft' : `version ${s.version}`,
          s.runner_labels.length ? `, labels ${s.runner_labels.join(', ')}` : '',
        ],
      ],
      ['State', (s) => (s.paused ? badge('paused') : badge(s.state))],
      ['Alerts', (s) => describeNotify(s.notify)],
      [
        'Next',
        (s) =>
          s.next_occurrences.length
            ? h(
                'ul',
                { class: 'plain' },
                s.next_occurrences
                  .slice(0, 3)
                  .map((t) => h('li', {}, h('time', { datetime: t, title: t }, inZone(t, s.timezone)))),
              )
            : h('span', { class: 'muted' }, '—'),
      ],
      [
        'Actions',
        (s) =>
          writable
            ? [
                h(
                  'button',
                  {
                    type: 'button',
                    onclick: () => act('PATCH', `/flows/${flowId}/schedules/${s.id}`, { paused: !s.paused }),
                  },
                  s.paused ? 'Resume' : 'Pause',
                ),
                ' ',
                h('button', { type: 'button', class: 'schedule-edit-notify', onclick: () => editNotify(s) }, 'Alerts…'),
                ' ',
                h(
                  'button',
                  {
                    type: 'button',
                    class: 'danger',
                    onclick: () =>
                      confirm(`Delete the schedule ${s.cron}?`) && act('DELETE', `/flows/${flowId}/schedules/${s.id}`),
                  },
                  'Delete',
                ),
              ]
            : null,
      ],
    ],
    listed.items,
    'No schedules.',
  );
  fill(
    el,
    h('h2', {}, 'Schedules'),
    error,
    rows,
    editor,
    writable && listed.items.length < 10 ? scheduleForm(flowId, environments, reload) : null,
  );
}

/** The form that creates a schedule; the preview shows the next five fire times in the chosen zone. */
function scheduleForm(flowId, environments, done) {
  const error = notice();
  const cron = h('input', { id: 'schedule-cron', value: '*/15 * * * *', required: true, class: 'code' });
  const zoneList = h(
    'datalist',
    { id: 'schedule-zones' },
    zones().map((z) => h('option', { value: z })),
  );
  const local = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  const zone = h('input', { id: 'schedule-zone', value: local, list: 'schedule-zones', required: true });
  const environment = h(
    'select',
    { id: 'schedule-environment' },
    h('option', { value: '' }, 'no environment'),
    environments.map((e) => h('option', { value: e.key }, e.key)),
  );
  const version = h(
    'select',
    { id: 'schedule-version' },
    h('option', { value: '' }, 'the draft'),
    h('option', { value: 'latest' }, 'latest published'),
  );
  const overlap = h(
    'select',
    { id: 'schedule-overlap' },
    h('option', { value: 'skip' }, 'skip while the last run is going'),
    h('option', { value: 'allow' }, 'run anyway'),
  );
  const catchUp = h('input', { id: 'schedule-catch-up', type: 'number', min: 0, max: 86400, value: '0' });
  const labels = h('input', { id: 'schedule-labels', placeholder: 'eu, linux' });
  const variables = h('textarea', {
    id: 'schedule-variables',
    rows: 2,
    class: 'code',
    placeholder: 'name=value, one a line',
  });
  const notify = notifyControls('schedule', 'schedule-channel', null);
  const preview = h('ul', { class: 'plain', id: 'schedule-preview', 'aria-live': 'polite' });
  let timer = 0;
  const showPreview = () => {
    clearTimeout(timer);
    timer = window.setTimeout(async () => {
      try {
        const body = { cron: cron.value, timezone: zone.value, from: new Date().toISOString(), count: 5 };
        const answer = await call('POST', '/schedules/preview', body);
        fill(
          preview,
          answer.occurrences.map((t) => h('li', {}, h('time', { datetime: t, title: t }, inZone(t, zone.value)))),
        );
      } catch (e) {
        fill(preview, h('li', { class: 'muted' }, e.message || String(e)));
      }
    }, 300);
  };
  cron.addEventListener('input', showPreview);
  zone.addEventListener('input', showPreview);
  showPreview();
  const form = h(
    'form',
    { class: 'stack', id: 'schedule-form' },
    h('h3', {}, 'New schedule'),
    error,
    field('Cron', cron, '5 fields (minute hour day month weekday), or 6 with seconds first'),
    field('Time zone', zone),
    zoneList,
    field('Environment', environment),
    field('Version', version),
    field('When the last run is still going', overlap),
    field('Catch up missed runs (seconds)', catchUp),
    field('Runner labels', labels),
    field('Variables', variables),
    notify.fields,
    h('div', { class: 'field' }, h('span', {}, 'Next fire times'), preview),
    h('button', { type: 'submit', class: 'primary' }, 'Add schedule'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const body = {
      cron: cron.value,
      timezone: zone.value,
      overlap: overlap.value,
      catch_up_s: Number(catchUp.value) || 0,
    };
    if (environment.value) body.environment = environment.value;
    if (version.value) body.version = version.value;
    const wanted = labels.value
      .split(',')
      .map((l) => l.trim())
      .filter(Boolean);
    if (wanted.length) body.runner_labels = wanted;
    const vars = parseVariables(variables.value);
    if (Object.keys(vars).length) body.variables = vars;
    const wantedNotify = notify.read();
    if (wantedNotify.channels.length) body.notify = wantedNotify;
    try {
      await call('POST', `/flows/${flowId}/schedules`, body);
      await done();
    } catch (e) {
      error.show(e);
    }
  });
  return form;
}
