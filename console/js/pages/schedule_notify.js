// @ts-check
// Whom a schedule alerts: the organization's notification channels as checkboxes, after how many failed runs,
// and whether a recovery is told. Used by the form that creates a schedule and by the editor that changes an
// existing schedule's `notify`.

import { h, fill, field, notice } from '../dom.js';
import { call, can } from '../api.js';

/** What a schedule's `notify` says, in a few words. */
export function describeNotify(notify) {
  if (!notify || !notify.channels.length) return 'none';
  const n = notify.channels.length;
  const runs = notify.after_failures === 1 ? 'the first failed run' : `${notify.after_failures} failed runs`;
  return `${n} channel${n === 1 ? '' : 's'}, after ${runs}${notify.on_recovery ? ', and on recovery' : ''}`;
}

/**
 * The channel checkboxes (class `className`, the ones in `picked` checked), after-failures and on-recovery
 * controls, with ids made from `prefix`; `read()` answers the `notify` they say.
 */
export function notifyControls(prefix, className, current) {
  const picked = new Set(current ? current.channels : []);
  const box = h('div', { id: `${prefix}-channels` }, h('span', { class: 'muted' }, 'No channels.'));
  const afterFailures = h('input', {
    id: `${prefix}-after-failures`,
    type: 'number',
    min: 1,
    max: 100,
    value: String(current ? current.after_failures : 1),
  });
  const onRecovery = h('input', {
    id: `${prefix}-on-recovery`,
    type: 'checkbox',
    checked: current ? current.on_recovery : true,
  });
  if (can('organization:read')) {
    call('GET', '/notification-channels')
      .then((list) => {
        if (!list.items.length) {
          fill(box, h('span', { class: 'muted' }, 'No channels yet: add them on the Alerts page.'));
          return;
        }
        fill(
          box,
          list.items.map((c) =>
            h(
              'label',
              {},
              h('input', { type: 'checkbox', value: c.id, class: className, checked: picked.has(c.id) }),
              ` ${c.name} (${c.kind})`,
            ),
          ),
        );
      })
      .catch(() => {});
  }
  const fields = [
    field('Notify on failure and recovery', box),
    field('Failed runs before alerting', afterFailures),
    h('div', { class: 'field' }, h('label', {}, onRecovery, ' Also tell when it recovers')),
  ];
  const read = () => {
    /** @type {HTMLInputElement[]} */
    const checked = Array.from(box.querySelectorAll(`input.${className}:checked`));
    return {
      channels: checked.map((i) => i.value),
      after_failures: Number(afterFailures.value) || 1,
      on_recovery: onRecovery.checked,
    };
  };
  return { fields, read };
}

/** The form that changes an existing schedule's `notify`; `done` runs after a save, `cancel` closes it. */
export function notifyEditor(flowId, schedule, done, cancel) {
  const error = notice();
  const controls = notifyControls('schedule-notify', 'schedule-notify-channel', schedule.notify);
  const form = h(
    'form',
    { class: 'stack', id: 'schedule-notify-form' },
    h('h3', {}, `Alerts of ${schedule.cron} (${schedule.timezone})`),
    error,
    controls.fields,
    h(
      'div',
      { class: 'row' },
      h('button', { type: 'submit', class: 'primary' }, 'Save alerts'),
      ' ',
      h('button', { type: 'button', onclick: cancel }, 'Cancel'),
    ),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      await call('PATCH', `/flows/${flowId}/schedules/${schedule.id}`, { notify: controls.read() });
      await done();
    } catch (e) {
      error.show(e);
    }
  });
  return form;
}
