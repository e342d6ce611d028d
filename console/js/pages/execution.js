// @ts-check
// One execution, filled in live from its event stream, node by node: request, response, timings, extracted values
// and assertion results (the runner masked secrets before reporting them). A webhook node shows what it waits for
// and the capture that arrived; the captures of the execution's own URL are listed; a run a capture started links
// to that capture. An inline run (`#/executions/<id>`, a definition sent from a file) has no flow: it is read by
// its id alone, shows the file and Git commit it came from, and its nodes appear as they run.

import { h, fill, badge, notice } from '../dom.js';
import { call, all, can } from '../api.js';
import { follow } from '../sse.js';
import { endpointNames, waitsFor, arrived, captureList, captureHref } from './webhook_node.js';

/** The definition the execution ran: its published version's, or the draft's. */
async function ranDefinition(flow, execution) {
  if (execution.flow_version === null || execution.flow_version === undefined) return flow.definition;
  const versions = await all(`/flows/${flow.id}/versions`, 200);
  const ran = versions.find((v) => v.version === execution.flow_version);
  return ran ? ran.definition : flow.definition;
}

function head(id, status, extra) {
  return h('div', { class: 'node-head' }, h('code', {}, id), ' ', badge(status), extra || '');
}

/** The captures of the execution's own URL, listed when there are any; `load()` reads them again. */
function ownCaptures(base) {
  const el = h('section', { id: 'execution-captures', 'aria-label': "Captures at this execution's URL", hidden: true });
  let shown = '';
  const load = async () => {
    const page = await call('GET', `${base}/captures?limit=100`);
    const ids = page.items.map((c) => c.id).join(' ');
    if (!page.items.length || ids === shown) return;
    shown = ids;
    el.hidden = false;
    fill(
      el,
      h('h2', {}, "Captures at this execution's URL"),
      h('p', { class: 'muted' }, `${page.items.length}${page.next_cursor ? '+' : ''} received, newest first.`),
      captureList(page.items),
    );
  };
  return { el, load: () => load().catch(() => {}) };
}

/** An inline run's execution page (`#/executions/<id>`). */
export function renderInline(main, [executionId]) {
  return render(main, [null, executionId]);
}

/** Where an inline run came from: its file, Git commit and branch. */
function sourceFacts(source) {
  if (!source || source.kind !== 'inline') return null;
  return [
    ' · from ',
    h('code', { id: 'execution-source' }, source.path || 'an inline definition'),
    source.git_commit ? [' at ', h('code', { id: 'execution-commit' }, source.git_commit.slice(0, 12))] : '',
    source.git_ref ? ` (${source.git_ref})` : '',
  ];
}

export async function render(main, [flowId, executionId]) {
  const base = flowId ? `/flows/${flowId}/executions/${executionId}` : `/executions/${executionId}`;
  const [flow, execution] = await Promise.all([flowId ? call('GET', `/flows/${flowId}`) : null, call('GET', base)]);
  const definition = flow ? await ranDefinition(flow, execution) : { nodes: [] };
  const names = await endpointNames(definition);
  const specs = new Map((definition.nodes || []).map((n) => [n.id, n]));
  const waiting = (id) => (specs.get(id) && specs.get(id).kind === 'webhook' ? waitsFor(specs.get(id), names) : null);
  const error = notice();
  const status = h('span', { id: 'execution-status' }, badge(execution.status));
  const summary = h('p', { id: 'execution-summary', class: 'muted' });
  // Why a queued execution waits (computed by the server when read); gone once it leaves the queue.
  const waitingReason = execution.waiting_reason
    ? h('p', { id: 'execution-waiting', class: 'notice' }, `Waiting: ${execution.waiting_reason}`)
    : null;
  const nodes = h('ol', { id: 'execution-nodes', class: 'nodes' });
  const captures = ownCaptures(base);
  const order = (definition.nodes || []).map((n) => n.id);
  const items = new Map();
  const item = (id) => {
    if (!items.has(id)) {
      const el = h('li', { 'data-node': id, class: 'pending' }, head(id, 'pending'), waiting(id));
      items.set(id, el);
      const next = order
        .slice(order.indexOf(id) + 1)
        .map((n) => items.get(n))
        .find(Boolean);
      nodes.insertBefore(el, next || null);
    }
    return items.get(id);
  };
  order.forEach(item);
  let finished = false;
  const setStatus = (s, sum) => {
    fill(status, badge(s));
    if (s !== 'queued' && waitingReason) waitingReason.remove();
    if (sum)
      summary.textContent = `${sum.passed} passed, ${sum.failed} failed, ${sum.skipped} skipped of ${sum.nodes_total}`;
  };
  const cancel = h(
    'button',
    {
      type: 'button',
      class: 'danger',
      id: 'cancel',
      onclick: async () => {
        try {
          await call('POST', `${base}/cancel`);
        } catch (e) {
          error.show(e);
        }
      },
    },
    'Cancel',
  );
  const stream = follow(`${base}/stream`, {
    finished: () => finished,
    onEvent: (event) => {
      if (event.type === 'execution.status') setStatus(event.status);
      else if (event.type === 'node.started')
        fill(item(event.node_id), head(event.node_id, 'running'), waiting(event.node_id));
      else if (event.type === 'node.completed') {
        showResult(item(event.node_id), event, waiting(event.node_id));
        if (waiting(event.node_id)) captures.load();
      } else if (event.type === 'execution.completed') {
        finished = true;
        setStatus(event.status, event.summary);
        cancel.remove();
        captures.load();
      }
    },
  });
  const started = execution.trigger_request
    ? [
        ' · ',
        h(
          'a',
          {
            id: 'trigger-capture',
            href: captureHref(execution.trigger_request.webhook_id, execution.trigger_request.request_id),
          },
          'the capture that started it',
        ),
      ]
    : null;
  fill(
    main,
    h(
      'p',
      {},
      flow ? h('a', { href: `#/flows/${flowId}` }, `← ${flow.name}`) : h('a', { href: '#/executions' }, '← Executions'),
    ),
    h(
      'div',
      { class: 'page-head' },
      h('h1', {}, 'Execution'),
      status,
      can('flows:execute') && !['succeeded', 'failed', 'cancelled', 'error'].includes(execution.status) ? cancel : null,
    ),
    h(
      'p',
      { class: 'muted', id: 'execution-facts' },
      `Started ${new Date(execution.created_at).toLocaleString()} · trigger ${execution.trigger} · attempt ${execution.attempt}`,
      started,
      sourceFacts(execution.source),
      execution.batch_id
        ? [' · ', h('a', { href: `#/batches/${execution.batch_id}` }, `row ${execution.iteration} of a batch`)]
        : null,
    ),
    waitingReason,
    summary,
    error,
    nodes,
    captures.el,
  );
  captures.load();
  return () => stream.stop();
}

function pairs(headers) {
  const rows = Array.isArray(headers) ? headers : Object.entries(headers || {});
  return h(
    'table',
    { class: 'compact' },
    h(
      'tbody',
      {},
      rows.map(([name, value]) =>
        h(
          'tr',
          {},
          h('th', { scope: 'row' }, name),
          h('td', {}, Array.isArray(value) ? value.join(', ') : String(value)),
        ),
      ),
    ),
  );
}

/** A node's result; `wait` is what a webhook node waited for (null for other kinds). */
function showResult(el, result, wait) {
  el.className = result.status;
  const parts = [
    head(
      result.node_id,
      result.status,
      ` ${result.duration_ms} ms${result.retries ? ` · ${result.retries} retries` : ''}`,
    ),
  ];
  if (result.error) parts.push(h('p', { class: 'notice notice-error node-error' }, result.error));
  if (wait) parts.push(wait);
  if (result.capture) parts.push(arrived(result.capture));
  if (result.request) {
    parts.push(
      h(
        'details',
        {},
        h('summary', {}, `Request: ${result.request.method} ${result.request.url}`),
        pairs(result.request.headers),
        result.request.body ? h('pre', { class: 'body' }, result.request.body) : null,
      ),
    );
  }
  if (result.response) {
    const timings = result.response.timings_ms
      ? Object.entries(result.response.timings_ms)
          .map(([k, v]) => `${k} ${v} ms`)
          .join(' · ')
      : '';
    parts.push(
      h(
        'details',
        {},
        h(
          'summary',
          {},
          `Response: ${result.response.status} · ${result.response.body_size} bytes${result.response.truncated ? ' (truncated)' : ''}`,
        ),
        timings ? h('p', { class: 'muted' }, timings) : null,
        pairs(result.response.headers),
        result.response.body ? h('pre', { class: 'body' }, result.response.body) : null,
      ),
    );
  }
  const extracted = Object.entries(result.extracted || {});
  if (extracted.length)
    parts.push(
      h(
        'div',
        { class: 'extracted' },
        h('h4', {}, 'Extracted'),
        pairs(extracted.map(([k, v]) => [k, JSON.stringify(v)])),
      ),
    );
  if ((result.assertions || []).length) {
    parts.push(
      h(
        'ul',
        { class: 'assertions' },
        result.assertions.map((a) =>
          h(
            'li',
            { class: a.passed ? 'passed' : 'failed' },
            a.passed ? '✓ ' : '✗ ',
            `${a.source} ${a.operator}`,
            a.expected !== undefined && a.expected !== null ? ` ${JSON.stringify(a.expected)}` : '',
            a.passed ? '' : ` (actual ${JSON.stringify(a.actual)}${a.reason ? `, ${a.reason}` : ''})`,
          ),
        ),
      ),
    );
  }
  fill(el, parts);
}
