// @ts-check
// One flow: its nodes at a glance (request, extractors, assertions), the definition editor with each validation
// problem shown beside the node and field it names, versions (publish, restore), environments, launch, executions.
// A webhook node shows what it waits for (the endpoint by name, or the execution's own URL, and its search).

import { h, fill, field, notice, table, badge, when } from '../dom.js';
import { call, all, can } from '../api.js';
import { endpointNames, waitsFor, captureHref } from './webhook_node.js';

export async function render(main, [flowId]) {
  const flow = await call('GET', `/flows/${flowId}`);
  const error = notice();
  const sections = {
    nodes: h('section', { 'aria-label': 'Nodes' }),
    editor: h('section', { 'aria-label': 'Definition' }),
    launch: h('section', { 'aria-label': 'Launch' }),
    executions: h('section', { 'aria-label': 'Executions' }),
    versions: h('section', { 'aria-label': 'Versions' }),
    environments: h('section', { 'aria-label': 'Environments' }),
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
    h('div', { class: 'grid' }, sections.nodes, sections.launch),
    sections.executions,
    sections.editor,
    sections.versions,
    sections.environments,
  );
  const [environments, names] = await Promise.all([
    call('GET', `/flows/${flowId}/environments`),
    endpointNames(flow.definition),
  ]);
  showNodes(sections.nodes, flow.definition, names);
  showEditor(sections.editor, flow, () => render(main, [flowId]));
  showLaunch(sections.launch, flow, environments.items);
  await Promise.all([
    showExecutions(sections.executions, flowId),
    showVersions(sections.versions, flow, () => render(main, [flowId])),
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

/** A node's extractors and assertions, as written. */
function checks(node) {
  return [
    (node.extractors || []).length
      ? h(
          'p',
          { class: 'muted' },
          'Extracts: ',
          node.extractors
            .map(
              (e) => `${e.name} ← ${e.kind}${e.expression ? ` ${e.expression}` : ''}${e.header ? ` ${e.header}` : ''}`,
            )
            .join(', '),
        )
      : null,
    (node.assertions || []).length
      ? h(
          'ul',
          { class: 'assertions' },
          node.assertions.map((a) =>
            h('li', {}, `${a.source} ${a.operator}${a.expected !== undefined ? ` ${JSON.stringify(a.expected)}` : ''}`),
          ),
        )
      : null,
  ];
}

function describeNode(node, names) {
  if (node.kind === 'request') {
    const request = node.request || {};
    return [
      h(
        'p',
        {},
        h('strong', {}, request.method || 'request'),
        ' ',
        h('code', {}, request.url || (node.request_ref ? 'a collection request' : '')),
      ),
      checks(node),
    ];
  }
  if (node.kind === 'webhook') return [waitsFor(node, names), checks(node)];
  if (node.kind === 'delay') return h('p', {}, `Wait ${node.delay_ms} ms`);
  if (node.kind === 'module') return h('p', {}, `Runs flow ${node.flow_id} (${node.version || 'latest'})`);
  return h('p', {}, `Sets ${Object.keys(node.variables || {}).join(', ')}`);
}

function showNodes(el, definition, names) {
  const nodes = definition.nodes || [];
  fill(
    el,
    h('h2', {}, 'Nodes'),
    nodes.length
      ? h(
          'ol',
          { class: 'nodes' },
          nodes.map((node) =>
            h(
              'li',
              { 'data-node': node.id },
              h(
                'div',
                { class: 'node-head' },
                h('code', {}, node.id),
                ' ',
                h('span', { class: 'kind' }, node.kind),
                node.name ? ` ${node.name}` : '',
                node.enabled === false ? ' (disabled)' : '',
              ),
              describeNode(node, names),
            ),
          ),
        )
      : h('p', { class: 'empty' }, 'No nodes yet: edit the definition below.'),
  );
}

function showEditor(el, flow, reload) {
  const text = h(
    'textarea',
    { id: 'definition', rows: 18, spellcheck: 'false', class: 'code', 'aria-label': 'Definition (JSON)' },
    JSON.stringify(flow.definition, null, 2),
  );
  const problems = h('ul', { id: 'problems', class: 'problems', 'aria-live': 'polite' });
  const error = notice();
  const check = async () => {
    let definition;
    try {
      definition = JSON.parse(text.value);
    } catch (e) {
      fill(problems, h('li', {}, `Not JSON: ${e.message}`));
      return null;
    }
    const result = await call('POST', '/flows/validate', { definition, flow_id: flow.id });
    fill(
      problems,
      result.problems.map((p) =>
        h(
          'li',
          {},
          p.node_id ? [h('strong', {}, `node ${p.node_id}`), ' · '] : null,
          h('code', {}, p.field || 'definition'),
          ': ',
          p.message,
        ),
      ),
    );
    // Each problem also shows beside its node in the Nodes view.
    for (const old of document.querySelectorAll('.node-problem')) old.remove();
    for (const p of result.problems.filter((x) => x.node_id)) {
      const node = [...document.querySelectorAll('ol.nodes > li[data-node]')]
        .map((li) => /** @type {HTMLElement} */ (li))
        .find((li) => li.dataset.node === p.node_id);
      if (node)
        node.append(h('p', { class: 'node-problem', role: 'note' }, h('code', {}, p.field || 'node'), ': ', p.message));
    }
    return result.valid ? definition : null;
  };
  const save = async () => {
    error.show('');
    try {
      const definition = await check();
      if (!definition) return;
      await call('PATCH', `/flows/${flow.id}`, { definition });
      await reload();
    } catch (e) {
      error.show(e);
    }
  };
  fill(
    el,
    h('h2', {}, 'Definition'),
    error,
    h('p', { class: 'muted' }, `Draft revision ${flow.draft_revision}.`),
    text,
    problems,
    h(
      'div',
      { class: 'actions' },
      h('button', { type: 'button', id: 'validate', onclick: () => check().catch((e) => error.show(e)) }, 'Validate'),
      can('flows:write')
        ? h('button', { type: 'button', class: 'primary', id: 'save-definition', onclick: save }, 'Save draft')
        : null,
    ),
  );
}

function showLaunch(el, flow, environments) {
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
  const form = h(
    'form',
    { class: 'stack', id: 'launch-form' },
    h('h2', {}, 'Launch'),
    error,
    field('Environment', environment),
    field('Version', version),
    field('Variables', variables),
    h('button', { type: 'submit', class: 'primary', id: 'launch' }, 'Launch'),
  );
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
