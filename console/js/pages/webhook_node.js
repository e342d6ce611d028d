// @ts-check
// A webhook node in the app: what it waits for (an endpoint by name with a link to it, or the execution's own
// capture URL; the search as the definition writes it: q, filter, signature, timeout) and the capture that
// arrived (method, path, time, verdict badge, headers in order, body), with links to a capture's own page.

import { h, when, table } from '../dom.js';
import { call } from '../api.js';
import { signatureBadge } from './signature.js';

/** How long a node waits when its definition does not say (the engine's default). */
const DEFAULT_WAIT_MS = 30000;

/** The address of a stored capture's own page. */
export function captureHref(webhookId, captureId) {
  return `#/webhooks/${webhookId}/requests/${captureId}`;
}

/** The address of an execution's page. */
export function executionHref(flowId, executionId) {
  return `#/flows/${flowId}/executions/${executionId}`;
}

/**
 * The names of the endpoints the webhook nodes of `definitions` wait on, by id (an endpoint that is gone or not
 * readable is left out: the node then names its id).
 */
export async function endpointNames(...definitions) {
  const ids = new Set(
    definitions
      .flatMap((d) => (d && d.nodes) || [])
      .filter((n) => n.kind === 'webhook' && n.webhook && n.webhook.webhook_id)
      .map((n) => n.webhook.webhook_id),
  );
  const found = await Promise.all([...ids].map((id) => call('GET', `/webhooks/${id}`).catch(() => null)));
  return new Map(found.filter(Boolean).map((w) => [w.id, w.name]));
}

function duration(ms) {
  if (ms % 60000 === 0) return `${ms / 60000} min`;
  if (ms % 1000 === 0) return `${ms / 1000} s`;
  return `${ms} ms`;
}

/** Where the node waits: a link to the endpoint, or the execution's own URL. */
function place(wait, names) {
  if (!wait.webhook_id) {
    return h('span', { class: 'wait-place' }, "this execution's own URL ", h('code', {}, '{{execution.capture_url}}'));
  }
  const name = names.get(wait.webhook_id);
  return h(
    'a',
    { href: `#/webhooks/${wait.webhook_id}`, class: 'wait-place' },
    name || `endpoint ${wait.webhook_id}`,
    name ? '' : ' (not found)',
  );
}

/** What a webhook node waits for, as its definition writes it. */
export function waitsFor(node, names = new Map()) {
  const wait = node.webhook || {};
  const timeout = wait.timeout_ms || DEFAULT_WAIT_MS;
  const filter = wait.filter && Object.keys(wait.filter).length ? JSON.stringify(wait.filter) : null;
  return h(
    'div',
    { class: 'wait', 'data-wait': '' },
    h('p', {}, 'Waits for a capture at ', place(wait, names)),
    h(
      'dl',
      { class: 'facts' },
      h('dt', {}, 'Search'),
      h('dd', { class: 'wait-q' }, wait.q ? h('code', {}, wait.q) : 'any capture'),
      filter ? [h('dt', {}, 'Filter'), h('dd', { class: 'wait-filter' }, h('code', {}, filter))] : null,
      h('dt', {}, 'Signature'),
      h('dd', { class: 'wait-signature' }, wait.signature === 'valid' ? 'must be valid' : 'any'),
      h('dt', {}, 'Timeout'),
      h('dd', { class: 'wait-timeout' }, `${duration(timeout)}${wait.timeout_ms ? '' : ' (the default)'}`),
    ),
  );
}

/** A capture's body as text: pretty JSON when it parses, a note for binary, truncated or empty bodies. */
function bodyView(capture) {
  if (capture.body_truncated)
    return h('p', { class: 'muted' }, `Body of ${capture.body_size} bytes left out for size.`);
  if (!capture.body_size) return h('p', { class: 'empty' }, 'No body.');
  if (capture.body_encoding === 'base64')
    return h('p', { class: 'muted' }, `Binary body of ${capture.body_size} bytes.`);
  let text = capture.body;
  try {
    text = JSON.stringify(JSON.parse(capture.body), null, 2);
  } catch {
    /* shown as sent */
  }
  return h('pre', { class: 'body capture-body' }, text);
}

/** The request line of a capture: method, path with query, verdict badge, when it arrived. */
export function captureLine(capture) {
  return [
    h('span', { class: `method method-${capture.method.toLowerCase()}` }, capture.method),
    ' ',
    h('span', { class: 'path' }, capture.path || '/', capture.query_string ? `?${capture.query_string}` : ''),
    signatureBadge(capture.signature),
    ' · ',
    when(capture.received_at),
  ];
}

/** The capture a webhook node took: its line, a link to its page (endpoint captures), headers and body. */
export function arrived(capture) {
  return h(
    'div',
    { class: 'arrived' },
    h('h4', {}, 'Arrived'),
    h(
      'p',
      { class: 'capture-line' },
      captureLine(capture),
      capture.webhook_id
        ? [
            ' · ',
            h('a', { href: captureHref(capture.webhook_id, capture.id), class: 'capture-link' }, 'Open the capture'),
          ]
        : null,
    ),
    h(
      'details',
      {},
      h('summary', {}, `Headers (${capture.headers.length})`),
      table(
        [
          ['Name', (r) => r[0]],
          ['Value', (r) => r[1]],
        ],
        capture.headers,
        'No headers.',
      ),
    ),
    bodyView(capture),
  );
}

/** Captures listed in full (the execution's own URL's): each line opens to its headers and body. */
export function captureList(captures) {
  return h(
    'ul',
    { class: 'capture-list' },
    captures.map((c) =>
      h(
        'li',
        { 'data-id': c.id },
        h(
          'details',
          {},
          h('summary', {}, captureLine(c)),
          table(
            [
              ['Name', (r) => r[0]],
              ['Value', (r) => r[1]],
            ],
            c.headers,
            'No headers.',
          ),
          bodyView(c),
        ),
      ),
    ),
  );
}
