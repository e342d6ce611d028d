// @ts-check
// The organization's executions (`#/executions`, or `#/executions?batch=<id>` for one batch's rows), newest
// first: filtered by source (stored flows, or inline definitions run from files with `hookflow run`), status and
// batch. Each shows its flow (linked), or for an inline run the file it came from with its Git commit and branch;
// its batch row; its trigger, status and when it started. "Older" reads the next page.

import { h, fill, badge, notice, table, when } from '../dom.js';
import { call, all } from '../api.js';

const SOURCES = [
  ['', 'every source'],
  ['stored', 'stored flows'],
  ['inline', 'inline (files)'],
];
const STATUSES = ['', 'queued', 'running', 'succeeded', 'failed', 'error', 'cancelled'];

/** The page of an execution: its flow's, or (inline) its own. */
export function executionHref(e) {
  return e.flow_id ? `#/flows/${e.flow_id}/executions/${e.id}` : `#/executions/${e.id}`;
}

/** Where an execution came from: its flow (named from `names`), or the file (and commit) of an inline run. */
function source(e, names) {
  const s = e.source;
  if (!s || s.kind !== 'inline') return h('a', { href: `#/flows/${e.flow_id}` }, names.get(e.flow_id) || e.flow_id);
  return h(
    'span',
    { class: 'source-inline' },
    badge('inline'),
    ' ',
    h('code', {}, s.path || 'an inline definition'),
    s.git_commit ? [' @ ', h('code', { class: 'commit', title: s.git_commit }, s.git_commit.slice(0, 12))] : '',
    s.git_ref ? ` (${s.git_ref})` : '',
  );
}

export async function render(main, [batchId]) {
  const error = notice();
  const list = h('div', { id: 'executions-list' });
  const more = h('button', { type: 'button', id: 'executions-more', hidden: true }, 'Older');
  const sourceFilter = h(
    'select',
    { id: 'executions-source', 'aria-label': 'Source' },
    SOURCES.map(([value, label]) => h('option', { value }, label)),
  );
  const statusFilter = h(
    'select',
    { id: 'executions-status', 'aria-label': 'Status' },
    STATUSES.map((s) => h('option', { value: s }, s || 'every status')),
  );
  const batchFilter = h('input', {
    id: 'executions-batch',
    'aria-label': 'Batch id',
    placeholder: 'batch id',
    size: 38,
    value: batchId || '',
  });
  // Executions carry their flow's id; its name is read once, with the organization's flows.
  const names = new Map((await all('/flows', 1000)).map((f) => [f.id, f.name]));
  /** @type {any[]} */
  let items = [];
  /** @type {string | null} */
  let cursor = null;

  const query = () => {
    const params = new URLSearchParams({ limit: '50' });
    const value = (el) => /** @type {HTMLInputElement} */ (el).value.trim();
    if (value(sourceFilter)) params.set('source', value(sourceFilter));
    if (value(statusFilter)) params.set('status', value(statusFilter));
    if (value(batchFilter)) params.set('batch_id', value(batchFilter));
    if (cursor) params.set('cursor', cursor);
    return `/executions?${params}`;
  };
  const show = () =>
    fill(
      list,
      table(
        [
          ['Started', (e) => h('a', { href: executionHref(e) }, when(e.created_at))],
          ['Source', (e) => source(e, names)],
          ['Batch', (e) => (e.batch_id ? h('a', { href: `#/batches/${e.batch_id}` }, `row ${e.iteration}`) : '')],
          ['Trigger', (e) => e.trigger],
          ['Status', (e) => badge(e.status)],
        ],
        items,
        'No execution matches.',
        { stacked: true },
      ),
    );
  const load = async (next) => {
    try {
      if (!next) {
        cursor = null;
        items = [];
      }
      const page = await call('GET', query());
      items = items.concat(page.items);
      cursor = page.next_cursor || null;
      more.hidden = !cursor;
      error.show('');
      show();
    } catch (e) {
      error.show(e);
    }
  };
  for (const el of [sourceFilter, statusFilter]) el.addEventListener('change', () => load(false));
  batchFilter.addEventListener('change', () => load(false));
  more.addEventListener('click', () => load(true));

  fill(
    main,
    h('h1', {}, 'Executions'),
    h('p', { class: 'muted' }, 'Every run of the organization, newest first: stored flows and files run inline.'),
    error,
    h('div', { class: 'filters' }, sourceFilter, ' ', statusFilter, ' ', batchFilter),
    list,
    more,
  );
  await load(false);
}
