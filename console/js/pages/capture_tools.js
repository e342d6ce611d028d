// @ts-check
// What a capture can become: "Add to flow" turns it into a request node of a chosen flow (or a new one) and opens
// that flow's editor; "Compare" shows it beside another capture of the endpoint, headers by name and bodies by
// JSON path (or line by line when they are not JSON).

import { h, fill, field, notice, table, when } from '../dom.js';
import { call, all } from '../api.js';
import { captureToNode } from '../lib/capture_node.js';
import { read, send } from '../editor/send.js';
import { diffHeaders, diffJson, diffLines } from '../lib/diff.js';

const NEW_FLOW = 'new';

/** The "Add to flow" dialog for `capture`. */
export async function addToFlow(capture) {
  const error = notice();
  const flows = await all('/flows', 500);
  const target = h(
    'select',
    { name: 'flow' },
    h('option', { value: NEW_FLOW }, 'A new flow'),
    flows.map((f) => h('option', { value: f.id }, f.name)),
  );
  const name = h('input', { name: 'name', maxlength: 200, value: `From ${capture.method} ${capture.path || '/'}` });
  const nameField = field('New flow name', name);
  target.addEventListener('change', () => (nameField.hidden = target.value !== NEW_FLOW));
  const form = h(
    'form',
    { class: 'stack' },
    error,
    h('p', {}, 'The request becomes a node sent to ', h('code', {}, '{{base_url}}'), capture.path || '/', '.'),
    field('Flow', target),
    nameField,
    h('button', { type: 'submit', class: 'primary' }, 'Add to flow'),
  );
  const el = h(
    'dialog',
    { 'aria-label': 'Add to flow' },
    h('h2', {}, 'Add to flow'),
    form,
    h('form', { method: 'dialog', class: 'actions' }, h('button', { type: 'submit' }, 'Cancel')),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      const flowId = await appendNode(capture, target.value, name.value.trim());
      el.close();
      location.hash = `#/flows/${flowId}`;
    } catch (e) {
      error.show(e);
    }
  });
  document.body.append(el);
  el.addEventListener('close', () => el.remove());
  el.showModal();
  target.focus();
}

/** Adds the capture's node to the flow `flowId` (or a new flow named `name`); answers the flow's id. */
async function appendNode(capture, flowId, name) {
  if (flowId === NEW_FLOW) {
    const { node } = captureToNode(capture);
    const flow = await call('POST', '/flows', { name, definition: { nodes: [node] } });
    return flow.id;
  }
  // Read and written with the order-keeping JSON of the editor: the flow's definition keeps its author's order.
  const flow = await read(`/flows/${flowId}`);
  const definition = flow.definition;
  const nodes = definition.nodes || (definition.nodes = []);
  const { node } = captureToNode(
    capture,
    nodes.map((n) => n.id),
  );
  nodes.push(node);
  await send('PATCH', `/flows/${flowId}`, { definition });
  return flowId;
}

/** The notes the person should read before running the node made from `capture`. */
export function nodeNotes(capture) {
  return captureToNode(capture).notes;
}

/**
 * A "Compare" panel in `el` for `capture`: a choice of another capture of its endpoint, then the comparison.
 * @param {HTMLElement} el
 */
export async function compare(el, webhook, capture) {
  const page = await call('GET', `/webhooks/${webhook.id}/requests?limit=50`);
  const others = page.items.filter((c) => c.id !== capture.id);
  if (!others.length) {
    fill(el, h('p', { class: 'empty' }, 'No other capture of this endpoint to compare with.'));
    return;
  }
  const other = h(
    'select',
    { name: 'other' },
    others.map((c) => h('option', { value: c.id }, `${c.method} ${c.path || '/'} · ${when(c.received_at)}`)),
  );
  const result = h('div', { id: 'comparison', 'aria-live': 'polite' });
  const show = async () => {
    const right = await call('GET', `/webhooks/${webhook.id}/requests/${other.value}`);
    fill(result, comparison(capture, right));
  };
  other.addEventListener('change', () => show().catch((e) => fill(result, h('p', { class: 'notice' }, e.message))));
  fill(el, h('h3', {}, 'Compare'), field('Compare with', other), result);
  other.focus();
  await show();
}

/** Headers side by side, then the bodies' differences. */
function comparison(left, right) {
  const headers = diffHeaders(left.headers, right.headers);
  const changed = headers.filter((row) => !row.same);
  return [
    h('h4', {}, `Headers: ${changed.length} of ${headers.length} differ`),
    table(
      [
        ['Name', (r) => h('span', { class: r.same ? '' : 'diff-changed' }, r.name)],
        ['This request', (r) => r.left ?? '—'],
        ['Other request', (r) => r.right ?? '—'],
      ],
      headers,
      'No headers on either side.',
    ),
    h('h4', {}, 'Body'),
    bodyDiff(left, right),
  ];
}

function bodyDiff(left, right) {
  if (left.body_encoding !== 'utf8' || right.body_encoding !== 'utf8') {
    return h('p', {}, left.body_sha256 === right.body_sha256 ? 'The same bytes.' : 'Binary bodies that differ.');
  }
  const a = parse(left.body);
  const b = parse(right.body);
  if (a.ok && b.ok) {
    const { changes, truncated } = diffJson(a.value, b.value);
    if (!changes.length) return h('p', { id: 'body-same' }, 'The same JSON.');
    return [
      table(
        [
          ['Path', (c) => h('code', {}, c.path)],
          ['Change', (c) => h('span', { class: `diff-${c.kind}` }, c.kind)],
          ['This request', (c) => (c.kind === 'added' ? '—' : h('code', {}, JSON.stringify(c.left)))],
          ['Other request', (c) => (c.kind === 'removed' ? '—' : h('code', {}, JSON.stringify(c.right)))],
        ],
        changes,
      ),
      truncated ? h('p', { class: 'muted' }, 'Only the first differences are shown.') : null,
    ];
  }
  const lines = diffLines(left.body || '', right.body || '');
  if (!lines) return h('p', { class: 'muted' }, 'Too long to compare here.');
  return h(
    'pre',
    { class: 'body diff', tabindex: 0 },
    lines.map((l) =>
      h('span', { class: `diff-${l.kind}` }, `${l.kind === 'same' ? ' ' : l.kind === 'added' ? '+' : '-'} ${l.line}\n`),
    ),
  );
}

function parse(text) {
  try {
    return { ok: true, value: JSON.parse(text || '') };
  } catch {
    return { ok: false, value: null };
  }
}
