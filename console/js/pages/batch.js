// @ts-check
// A batch of a data-driven run (`#/batches/<id>`): its counts by status, read again every 2 s until no row is
// queued or running; its rows (one execution each, by row index) filtered by status, each linking to its execution;
// and "Run failed rows again", which makes a new batch of the failed rows and opens it.

import { h, fill, badge, notice, table, when } from '../dom.js';
import { call, all, can } from '../api.js';
import { executionHref } from './executions.js';

const STATUSES = ['', 'queued', 'running', 'succeeded', 'failed', 'error', 'cancelled'];

/** The batch's counts as one line. */
function counts(batch) {
  const parts = ['queued', 'running', 'succeeded', 'failed', 'cancelled']
    .filter((k) => batch[k] > 0)
    .map((k) => `${batch[k]} ${k}`);
  return `${batch.total} rows: ${parts.join(', ') || 'none yet'}`;
}

export async function render(main, [batchId]) {
  const error = notice();
  const summary = h('p', { id: 'batch-summary' });
  const finished = h('p', { id: 'batch-finished', class: 'muted' });
  const rows = h('div', { id: 'batch-rows' });
  const filter = h(
    'select',
    { id: 'batch-filter', 'aria-label': 'Rows of status' },
    STATUSES.map((s) => h('option', { value: s }, s || 'every status')),
  );
  const rerun = h('button', { id: 'batch-rerun', type: 'button', hidden: true }, 'Run failed rows again');
  let batch = await call('GET', `/batches/${batchId}`);

  const showRows = async () => {
    const status = /** @type {HTMLSelectElement} */ (filter).value;
    const items = await all(`/batches/${batchId}/executions${status ? `?status=${status}` : ''}`, 10000);
    fill(
      rows,
      table(
        [
          ['Row', (e) => String(e.iteration)],
          ['Status', (e) => badge(e.status)],
          ['Attempt', (e) => String(e.attempt)],
          ['Error', (e) => e.error || ''],
          ['Execution', (e) => h('a', { href: executionHref(e) }, 'open')],
        ],
        items,
        'No row in this status.',
        { stacked: true },
      ),
    );
  };
  const showSummary = () => {
    summary.textContent = counts(batch);
    if (batch.finished_at) fill(finished, 'Finished ', when(batch.finished_at));
    else fill(finished, 'Running…');
    rerun.hidden = !(batch.failed > 0 && batch.finished_at && can('flows:execute'));
  };
  filter.addEventListener('change', () => showRows().catch((e) => error.show(e)));
  rerun.addEventListener('click', async () => {
    try {
      const launched = await call('POST', `/batches/${batchId}/rerun`, { only: 'failed' });
      location.hash = `#/batches/${launched.batch_id}`;
    } catch (e) {
      error.show(e);
    }
  });

  fill(
    main,
    h('h1', {}, 'Batch'),
    h(
      'p',
      { class: 'muted' },
      batch.flow_id ? h('a', { href: `#/flows/${batch.flow_id}` }, 'Its flow') : 'An inline definition',
      batch.rerun_of
        ? [' · reruns the failed rows of ', h('a', { href: `#/batches/${batch.rerun_of}` }, 'a batch')]
        : '',
      ' · ',
      h('a', { href: `#/executions?batch=${batch.id}`, id: 'batch-in-list' }, 'its rows among the executions'),
    ),
    error,
    summary,
    finished,
    rerun,
    h('h2', {}, 'Rows'),
    filter,
    rows,
  );
  showSummary();
  await showRows();
  let timer = null;
  const poll = async () => {
    if (batch.finished_at) return;
    try {
      batch = await call('GET', `/batches/${batchId}`);
      showSummary();
      await showRows();
    } catch (e) {
      error.show(e);
    }
    timer = setTimeout(poll, 2000);
  };
  timer = setTimeout(poll, 2000);
  return () => clearTimeout(timer);
}
