// One execution, filled in live from its event stream, node by node: request, response, timings, extracted values
// and assertion results (the runner masked secrets before reporting them).

import { h, fill, badge, when, notice } from '../dom.js';
import { call, can } from '../api.js';
import { follow } from '../sse.js';

export async function render(main, [flowId, executionId]) {
  const [flow, execution] = await Promise.all([
    call('GET', `/flows/${flowId}`), call('GET', `/flows/${flowId}/executions/${executionId}`),
  ]);
  const error = notice();
  const status = h('span', { id: 'execution-status' }, badge(execution.status));
  const summary = h('p', { id: 'execution-summary', class: 'muted' });
  const nodes = h('ol', { id: 'execution-nodes', class: 'nodes' });
  const order = (flow.definition.nodes || []).map((n) => n.id);
  const items = new Map();
  const item = (id) => {
    if (!items.has(id)) {
      const el = h('li', { 'data-node': id, class: 'pending' }, h('div', { class: 'node-head' }, h('code', {}, id), ' ', badge('pending')));
      items.set(id, el);
      const next = order.slice(order.indexOf(id) + 1).map((n) => items.get(n)).find(Boolean);
      nodes.insertBefore(el, next || null);
    }
    return items.get(id);
  };
  order.forEach(item);
  let finished = false;
  const setStatus = (s, sum) => {
    fill(status, badge(s));
    if (sum) summary.textContent = `${sum.passed} passed, ${sum.failed} failed, ${sum.skipped} skipped of ${sum.nodes_total}`;
  };
  const cancel = h('button', { type: 'button', class: 'danger', id: 'cancel', onclick: async () => {
    try { await call('POST', `/flows/${flowId}/executions/${executionId}/cancel`); } catch (e) { error.show(e); }
  } }, 'Cancel');
  const stream = follow(`/flows/${flowId}/executions/${executionId}/stream`, {
    finished: () => finished,
    onEvent: (event) => {
      if (event.type === 'execution.status') setStatus(event.status);
      else if (event.type === 'node.started') fill(item(event.node_id), h('div', { class: 'node-head' }, h('code', {}, event.node_id), ' ', badge('running')));
      else if (event.type === 'node.completed') showResult(item(event.node_id), event);
      else if (event.type === 'execution.completed') { finished = true; setStatus(event.status, event.summary); cancel.remove(); }
    },
  });
  fill(main,
    h('p', {}, h('a', { href: `#/flows/${flowId}` }, `← ${flow.name}`)),
    h('div', { class: 'page-head' }, h('h1', {}, 'Execution'), status,
      can('flows:execute') && !['succeeded', 'failed', 'cancelled', 'error'].includes(execution.status) ? cancel : null),
    h('p', { class: 'muted' }, `Started ${new Date(execution.created_at).toLocaleString()} · trigger ${execution.trigger} · attempt ${execution.attempt}`),
    summary, error, nodes);
  return () => stream.stop();
}

function pairs(headers) {
  const rows = Array.isArray(headers) ? headers : Object.entries(headers || {});
  return h('table', { class: 'compact' }, h('tbody', {}, rows.map(([name, value]) => h('tr', {}, h('th', { scope: 'row' }, name), h('td', {}, Array.isArray(value) ? value.join(', ') : String(value))))));
}

function showResult(el, result) {
  el.className = result.status;
  const parts = [h('div', { class: 'node-head' }, h('code', {}, result.node_id), ' ', badge(result.status),
    ` ${result.duration_ms} ms`, result.retries ? ` · ${result.retries} retries` : '')];
  if (result.error) parts.push(h('p', { class: 'notice notice-error' }, result.error));
  if (result.request) {
    parts.push(h('details', {}, h('summary', {}, `Request: ${result.request.method} ${result.request.url}`),
      pairs(result.request.headers), result.request.body ? h('pre', { class: 'body' }, result.request.body) : null));
  }
  if (result.response) {
    const timings = result.response.timings_ms ? Object.entries(result.response.timings_ms).map(([k, v]) => `${k} ${v} ms`).join(' · ') : '';
    parts.push(h('details', {}, h('summary', {}, `Response: ${result.response.status} · ${result.response.body_size} bytes${result.response.truncated ? ' (truncated)' : ''}`),
      timings ? h('p', { class: 'muted' }, timings) : null, pairs(result.response.headers),
      result.response.body ? h('pre', { class: 'body' }, result.response.body) : null));
  }
  const extracted = Object.entries(result.extracted || {});
  if (extracted.length) parts.push(h('div', { class: 'extracted' }, h('h4', {}, 'Extracted'), pairs(extracted.map(([k, v]) => [k, JSON.stringify(v)]))));
  if ((result.assertions || []).length) {
    parts.push(h('ul', { class: 'assertions' }, result.assertions.map((a) => h('li', { class: a.passed ? 'passed' : 'failed' },
      a.passed ? '✓ ' : '✗ ', `${a.source} ${a.operator}`, a.expected !== undefined && a.expected !== null ? ` ${JSON.stringify(a.expected)}` : '',
      a.passed ? '' : ` (actual ${JSON.stringify(a.actual)}${a.reason ? `, ${a.reason}` : ''})`))));
  }
  fill(el, parts);
}
