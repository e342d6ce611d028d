// @ts-check
// One captured request, whole: method, path, query as a table, headers in their original order with repeats, the
// body as pretty JSON, raw text or hex, its size and SHA-256, the executions it started; copy as curl, replay to a
// URL, delete. Shown beside the inspector's list, and as a page of its own (`#/webhooks/<id>/requests/<id>`).

import { captureDeliveries } from './destinations.js';
import { h, fill, copyButton, notice, table, when, bytes } from '../dom.js';
import { call, can } from '../api.js';
import { signatureFacts } from './signature.js';
import { executionHref } from './webhook_node.js';
import { asCurl as curlFor } from '../lib/curl.js';
import { addToFlow, compare, nodeNotes } from './capture_tools.js';

const HEX_LIMIT = 64 * 1024;

function bodyBytes(capture) {
  if (capture.body === null || capture.body === undefined) return new Uint8Array();
  if (capture.body_encoding === 'base64') return Uint8Array.from(atob(capture.body), (c) => c.charCodeAt(0));
  return new TextEncoder().encode(capture.body);
}

function hexDump(data) {
  const lines = [];
  for (let offset = 0; offset < Math.min(data.length, HEX_LIMIT); offset += 16) {
    const chunk = data.slice(offset, offset + 16);
    const hex = [...chunk].map((b) => b.toString(16).padStart(2, '0')).join(' ');
    const text = [...chunk].map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${offset.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${text}`);
  }
  if (data.length > HEX_LIMIT) lines.push(`… ${data.length - HEX_LIMIT} more bytes`);
  return lines.join('\n');
}

function pretty(capture) {
  if (capture.body_encoding !== 'utf8' || !capture.body) return null;
  try {
    return JSON.stringify(JSON.parse(capture.body), null, 2);
  } catch {
    return null;
  }
}

/** The capture as a curl command line that sends it again to its capture URL. */
export function asCurl(webhook, capture) {
  return curlFor(webhook.capture_url, capture);
}

/** Links to the executions a capture started, flows by name. */
async function executionLinks(started) {
  if (!started.length) return h('span', { class: 'muted' }, 'no execution');
  const flowIds = [...new Set(started.map((x) => x.flow_id))];
  const flows = await Promise.all(flowIds.map((id) => call('GET', `/flows/${id}`).catch(() => null)));
  const names = new Map(flows.filter(Boolean).map((f) => [f.id, f.name]));
  return h(
    'ul',
    { class: 'plain' },
    started.map((x) =>
      h(
        'li',
        {},
        h(
          'a',
          { href: executionHref(x.flow_id, x.execution_id), title: x.execution_id },
          `${names.get(x.flow_id) || `flow ${x.flow_id}`}: execution ${x.execution_id}`,
        ),
      ),
    ),
  );
}

/**
 * The facts lines of the executions a capture started through its endpoint's triggers. A launch follows its
 * capture, so a fresh capture of an endpoint with triggers is read again for a few seconds until one shows.
 */
async function startedFacts(webhook, capture) {
  const started = capture.executions || [];
  const triggered = (webhook.triggers || []).length > 0;
  if (!started.length && !triggered) return [];
  const dd = h('dd', { id: 'capture-executions' }, await executionLinks(started));
  const fresh = Date.now() - new Date(capture.received_at).getTime() < 30000;
  if (!started.length && fresh) {
    (async () => {
      for (let i = 0; i < 10 && !(capture.executions || []).length; i++) {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        if (!dd.isConnected && i > 0) return;
        try {
          capture = await call('GET', `/webhooks/${webhook.id}/requests/${capture.id}`);
        } catch {
          return;
        }
      }
      if ((capture.executions || []).length) fill(dd, await executionLinks(capture.executions));
    })();
  }
  return [h('dt', {}, 'Started'), dd];
}

/** A capture as a page of its own: a link back to its endpoint's inspector above the whole capture. */
export async function renderPage(main, [webhookId, captureId]) {
  const webhook = await call('GET', `/webhooks/${webhookId}`);
  const detail = h('section', { id: 'capture-detail', class: 'detail', 'aria-label': 'Captured request' });
  fill(main, h('p', {}, h('a', { href: `#/webhooks/${webhookId}` }, `← ${webhook.name}`)), detail);
  await showCapture(detail, webhook, captureId, () => {
    location.hash = `#/webhooks/${webhookId}`;
  });
}

export async function showCapture(el, webhook, captureId, onDeleted) {
  fill(el, h('p', { class: 'muted' }, 'Loading…'));
  const capture = await call('GET', `/webhooks/${webhook.id}/requests/${captureId}`);
  const started = await startedFacts(webhook, capture);
  const error = notice();
  const data = bodyBytes(capture);
  const views = {
    pretty: pretty(capture),
    raw: capture.body_encoding === 'utf8' ? capture.body || '' : null,
    hex: hexDump(data),
  };
  const body = h('pre', { id: 'body-view', class: 'body', tabindex: 0 });
  const tabs = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Body view' });
  const showView = (name) => {
    body.textContent = views[name];
    body.dataset.view = name;
    for (const tab of tabs.children) tab.setAttribute('aria-selected', String(tab.dataset.view === name));
  };
  for (const [name, label] of [
    ['pretty', 'Pretty JSON'],
    ['raw', 'Raw'],
    ['hex', 'Hex'],
  ]) {
    if (views[name] === null) continue;
    tabs.append(h('button', { type: 'button', role: 'tab', 'data-view': name, onclick: () => showView(name) }, label));
  }
  const queryRows = Object.entries(capture.query).flatMap(([name, values]) => values.map((value) => [name, value]));
  const target = h('input', {
    type: 'url',
    placeholder: 'https://example.com/hook',
    'aria-label': 'Replay to URL',
    required: true,
  });
  const replayOut = h('pre', { class: 'body', hidden: true });
  const replay = h('form', { class: 'inline' }, target, h('button', { type: 'submit' }, 'Replay'));
  replay.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      const answer = await call('POST', `/webhooks/${webhook.id}/requests/${capture.id}/replay`, {
        target_url: target.value,
      });
      replayOut.hidden = false;
      replayOut.textContent = `${answer.status} in ${answer.duration_ms} ms\n\n${answer.body || ''}`;
    } catch (e) {
      error.show(e);
    }
  });
  const comparing = h('section', { id: 'compare', 'aria-label': 'Compare' });
  const remove = async () => {
    try {
      await call('DELETE', `/webhooks/${webhook.id}/requests/${capture.id}`);
      onDeleted();
      fill(el, h('p', { class: 'empty' }, 'Deleted.'));
    } catch (e) {
      error.show(e);
    }
  };
  fill(
    el,
    h(
      'h2',
      {},
      h('span', { class: `method method-${capture.method.toLowerCase()}` }, capture.method),
      ' ',
      capture.path || '/',
    ),
    error,
    h(
      'dl',
      { class: 'facts' },
      h('dt', {}, 'Received'),
      h('dd', {}, when(capture.received_at)),
      h('dt', {}, 'From'),
      h('dd', {}, capture.source_ip),
      h('dt', {}, 'Size'),
      h('dd', { id: 'body-size' }, `${bytes(capture.body_size)} (${capture.body_size} bytes)`),
      h('dt', {}, 'SHA-256'),
      h('dd', {}, h('code', { id: 'body-sha256' }, capture.body_sha256)),
      h('dt', {}, 'Content type'),
      h('dd', {}, capture.content_type || '—'),
      ...signatureFacts(webhook, capture),
      ...started,
      ...((capture.deliveries || []).length
        ? [h('dt', {}, 'Delivered'), h('dd', { id: 'capture-deliveries' }, captureDeliveries(capture))]
        : []),
    ),
    h(
      'div',
      { class: 'actions' },
      copyButton('Copy as curl', () => asCurl(webhook, capture)),
      can('flows:write')
        ? h(
            'button',
            {
              type: 'button',
              class: 'small',
              title: nodeNotes(capture).join(' ') || 'A request node of a flow, sent to {{base_url}} and this path',
              onclick: () => addToFlow(capture).catch((e) => error.show(e)),
            },
            'Add to flow',
          )
        : null,
      h(
        'button',
        {
          type: 'button',
          class: 'small',
          'aria-expanded': 'false',
          onclick: (event) => {
            event.currentTarget.setAttribute('aria-expanded', 'true');
            compare(comparing, webhook, capture).catch((e) => error.show(e));
          },
        },
        'Compare',
      ),
      can('webhooks:write') ? h('button', { type: 'button', class: 'small danger', onclick: remove }, 'Delete') : null,
    ),
    comparing,
    can('webhooks:write') ? replay : null,
    replayOut,
    h('h3', {}, 'Query'),
    table(
      [
        ['Name', (r) => r[0]],
        ['Value', (r) => r[1]],
      ],
      queryRows,
      'No query string.',
    ),
    h('h3', {}, 'Headers'),
    h(
      'div',
      { id: 'headers-table' },
      table(
        [
          ['Name', (r) => r[0]],
          ['Value', (r) => r[1]],
        ],
        capture.headers,
        'No headers.',
      ),
    ),
    h('h3', {}, 'Body'),
    capture.body_size ? [tabs, body] : h('p', { class: 'empty' }, 'No body.'),
  );
  if (capture.body_size) showView(views.pretty !== null ? 'pretty' : views.raw !== null ? 'raw' : 'hex');
}
