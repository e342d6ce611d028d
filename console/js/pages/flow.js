// @ts-check
// One flow: the editor (its nodes as cards beside the JSON, validated as they change; editor/), launch (saving
// unsaved edits first), executions, versions (publish, restore), environments and schedules (pages/schedules.js).

import { h, fill, field, notice, table, badge, when } from '../dom.js';
import { call, all, can } from '../api.js';
import { captureHref } from './webhook_node.js';
import { mountEditor } from '../editor/editor.js';
import { read } from '../editor/send.js';
import { showSchedules } from './schedules.js';

export async function render(main, [flowId]) {
  // Read with the order-keeping parser: the editor shows the definition in its author's key order.
  const flow = await read(`/flows/${flowId}`);
  const error = notice();
  const sections = {
    editor: h('section', { class: 'editor', 'aria-label': 'Editor' }),
    launch: h('section', { 'aria-label': 'Launch' }),
    executions: h('section', { 'aria-label': 'Executions' }),
    versions: h('section', { 'aria-label': 'Versions' }),
    environments: h('section', { 'aria-label': 'Environments' }),
    schedules: h('section', { 'aria-label': 'Schedules' }),
  };
  fill(
    main,
    h(
      'div',
      { class: 'page-head' },
      h('h1', {}, flow.name),
      flow.tags.map((t) => h('span', { class: 'tag' }, t)),
    ),
    flow.description ? h('p', {}, flow.description) : null,
    error,
    // Launch first: a short form a keyboard reaches at once; then the editor, the longest part of the page.
    h('div', { class: 'flow-top' }, sections.launch, sections.executions),
    sections.editor,
    sections.versions,
    sections.environments,
    sections.schedules,
  );
  const environments = await call('GET', `/flows/${flowId}/environments`);
  const editor = await mountEditor(sections.editor, { flow, environments: environments.items });
  showLaunch(sections.launch, flow, environments.items, editor);
  await Promise.all([
    showExecutions(sections.executions, flowId),
    showVersions(sections.versions, flow, () => render(main, [flowId])),
    showSchedules(sections.schedules, flowId, environments.items),
  ]);
  fill(
    sections.environments,
    h('h2', {}, 'Environments'),
    table(
      [
        ['Key', (e) => e.key],
        ['Variables', (e) => Object.entries(e.variables).map(([k, v]) => h('div', {}, h('code', {}, k), ' = ', v))],
        ['Secrets used', (e) => e.secret_refs.join(', ') || '—'],
        ['Updated', (e) => when(e.updated_at)],
      ],
      environments.items,
      'No environments.',
    ),
  );
}

/** The launch form; valid unsaved edits in the editor are saved before a launch of the draft. */
function showLaunch(el, flow, environments, editor) {
  const error = notice();
  const environment = h(
    'select',
    {},
    h('option', { value: '' }, 'no environment'),
    environments.map((e) => h('option', { value: e.key }, e.key)),
  );
  const version = h(
    'select',
    {},
    h('option', { value: '' }, 'the draft'),
    h('option', { value: 'latest' }, 'latest published'),
  );
  const variables = h('textarea', { rows: 3, class: 'code', placeholder: 'name=value, one a line' });
  const unsaved = h(
    'p',
    { class: 'muted', id: 'launch-unsaved', hidden: !editor.dirty() },
    'The editor has unsaved edits: launching the draft saves them first when they are valid; otherwise the saved draft runs.',
  );
  const form = h(
    'form',
    { class: 'stack', id: 'launch-form' },
    h('h2', {}, 'Launch'),
    error,
    field('Environment', environment),
    field('Version', version),
    field('Variables', variables),
    unsaved,
    h('button', { type: 'submit', class: 'primary', id: 'launch' }, 'Launch'),
  );
  editor.onStatus((dirty) => {
    unsaved.hidden = !dirty;
  });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const body = {};
    if (environment.value) body.environment = environment.value;
    if (version.value) body.version = version.value;
    const vars = {};
    for (const line of variables.value.split('\n')) {
      const at = line.indexOf('=');
      if (at > 0) vars[line.slice(0, at).trim()] = line.slice(at + 1);
    }
    if (Object.keys(vars).length) body.variables = vars;
    // Valid unsaved edits are saved first; edits with problems stay unsaved and the saved draft runs.
    if (!version.value && editor.dirty()) await editor.save();
    try {
      const execution = await call('POST', `/flows/${flow.id}/launch`, body, {
        headers: { 'Idempotency-Key': crypto.randomUUID() },
      });
      location.hash = `#/flows/${flow.id}/executions/${execution.id}`;
    } catch (e) {
      error.show(e);
    }
  });
  fill(el, can('flows:execute') ? form : h('p', { class: 'muted' }, 'Your role cannot launch flows.'));
}

async function showExecutions(el, flowId) {
  const page = await call('GET', `/flows/${flowId}/executions?limit=20`);
  fill(
    el,
    h('h2', {}, 'Executions'),
    table(
      [
        ['Started', (x) => h('a', { href: `#/flows/${flowId}/executions/${x.id}` }, when(x.created_at))],
        ['Status', (x) => badge(x.status)],
        [
          'Trigger',
          (x) =>
            x.trigger_request
              ? h(
                  'a',
                  {
                    href: captureHref(x.trigger_request.webhook_id, x.trigger_request.request_id),
                    title: 'The capture that started it',
                  },
                  x.trigger,
                )
              : x.trigger,
        ],
        ['Version', (x) => (x.flow_version ? `v${x.flow_version}` : `draft r${x.draft_revision}`)],
        ['Nodes', (x) => `${x.summary.passed} passed, ${x.summary.failed} failed, ${x.summary.skipped} skipped`],
        ['Duration', (x) => (x.duration_ms === null ? '—' : `${x.duration_ms} ms`)],
        ['Batch', (x) => (x.batch_id ? h('a', { href: `#/batches/${x.batch_id}` }, `row ${x.iteration}`) : '—')],
      ],
      page.items,
      'Not run yet.',
    ),
  );
}

async function showVersions(el, flow, reload) {
  const versions = await all(`/flows/${flow.id}/versions`, 200);
  const error = notice();
  const note = h('input', { placeholder: 'What changed', 'aria-label': 'Version note' });
  const publish = h(
    'form',
    { class: 'inline' },
    note,
    h('button', { type: 'submit', id: 'publish' }, 'Publish the draft'),
  );
  publish.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      await call('POST', `/flows/${flow.id}/publish`, { note: note.value || null });
      await reload();
    } catch (e) {
      error.show(e);
    }
  });
  const restore = async (v) => {
    try {
      await call('POST', `/flows/${flow.id}/versions/${v.id}/restore`);
      await reload();
    } catch (e) {
      error.show(e);
    }
  };
  fill(
    el,
    h('h2', {}, 'Versions'),
    error,
    can('flows:write') ? publish : null,
    table(
      [
        ['Version', (v) => `v${v.version}`],
        ['Note', (v) => v.note || '—'],
        ['Published', (v) => when(v.created_at)],
        [
          '',
          (v) =>
            can('flows:write')
              ? h('button', { type: 'button', class: 'small', onclick: () => restore(v) }, 'Restore as draft')
              : '',
        ],
      ],
      versions,
      'Nothing published yet.',
    ),
  );
}
