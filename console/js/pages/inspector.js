// @ts-check
// The live inspector of one webhook: captures appear as they arrive, newest first, from a stream that resumes with
// Last-Event-ID after a dropped connection (duplicates are dropped by id); a search box takes the `q` syntax beside
// structured filters; volume and method charts; the selected capture's detail beside the list; the endpoint's
// triggers (the flows its captures launch); the "test this request" box of its response rules.

import { h, fill, copyButton, notice, bytes } from '../dom.js';
import { signatureBadge } from './signature.js';
import { call } from '../api.js';
import { follow } from '../sse.js';
import { volume, breakdown } from '../charts.js';
import { showCapture } from './capture_detail.js';
import { showTriggers } from './triggers.js';
import { showDestinations } from './destinations.js';
import { rulesTester } from './answers.js';

const LIMIT = 100;

export async function render(main, [webhookId]) {
  const webhook = await call('GET', `/webhooks/${webhookId}`);
  const error = notice();
  const state = h('span', { id: 'stream-state', class: 'state', 'aria-live': 'polite' }, 'connecting');
  const list = h('ul', { id: 'captures', class: 'captures', 'aria-label': 'Captured requests' });
  const detail = h(
    'section',
    { id: 'capture-detail', class: 'detail', 'aria-label': 'Selected request' },
    h('p', { class: 'empty' }, 'Select a request to see it whole.'),
  );
  const charts = h('div', { class: 'charts' });
  const triggers = h('section', { id: 'triggers', class: 'triggers', 'aria-label': 'Triggers' });
  const destinations = h('section', { id: 'destinations', class: 'destinations', 'aria-label': 'Destinations' });
  const newer = h('p', { class: 'notice notice-info', hidden: true });
  const seen = new Map();
  const streamed = new Set();
  let selected = null;
  let searching = false;
  let missed = 0;

  const row = (capture) => {
    const item = h(
      'li',
      { 'data-id': capture.id },
      h(
        'button',
        { type: 'button', class: 'capture', onclick: () => select(capture.id) },
        h('span', { class: `method method-${capture.method.toLowerCase()}` }, capture.method),
        ' ',
        h('span', { class: 'path' }, capture.path || '/', capture.query_string ? `?${capture.query_string}` : ''),
        ' ',
        signatureBadge(capture.signature),
        ' ',
        h(
          'span',
          { class: 'meta' },
          new Date(capture.received_at).toLocaleTimeString(),
          ' · ',
          bytes(capture.body_size),
        ),
      ),
    );
    if (capture.id === selected) item.classList.add('selected');
    return item;
  };
  const select = (id) => {
    selected = id;
    for (const item of list.children) item.classList.toggle('selected', item.dataset.id === id);
    showCapture(detail, webhook, id, () => {
      seen.delete(id);
      list.querySelector(`[data-id="${id}"]`)?.remove();
    });
  };
  /** Adds a capture where it belongs (ids are time-ordered), once. */
  const add = (capture) => {
    if (seen.has(capture.id)) return;
    seen.set(capture.id, capture);
    const item = row(capture);
    const after = [...list.children].find((el) => el.dataset.id < capture.id);
    list.insertBefore(item, after || null);
    while (list.children.length > LIMIT * 2) {
      seen.delete(list.lastChild.dataset.id);
      list.lastChild.remove();
    }
  };

  // Charts follow the captures: each streamed capture counts at once on the page (its hour and its method).
  const chartData = { series: null, methods: null };
  // Drawn at most twice a second: at 200 captures/s a redraw per frame would be most of the page's work.
  let drawQueued = false;
  let drawnAt = 0;
  const draw = () => {
    if (drawQueued) return;
    drawQueued = true;
    setTimeout(
      () =>
        requestAnimationFrame(() => {
          drawQueued = false;
          drawnAt = performance.now();
          if (chartData.series) drawCharts(charts, chartData.series, chartData.methods);
        }),
      Math.max(0, drawnAt + 500 - performance.now()),
    );
  };
  // The server's figures replace the page's 2 s after the last capture, or 10 s after the first one not yet
  // resynced while captures keep coming: what the page counted twice or missed is mended soon after.
  let resyncing = null;
  let pendingSince = 0;
  const resync = () => {
    const now = performance.now();
    if (!resyncing) pendingSince = now;
    clearTimeout(resyncing);
    resyncing = setTimeout(
      async () => {
        resyncing = null;
        try {
          Object.assign(chartData, await chartFigures(webhookId));
          draw();
        } catch {
          /* the next capture tries again */
        }
      },
      Math.max(0, Math.min(2000, pendingSince + 10_000 - now)),
    );
  };
  const counted = (capture) => {
    if (!chartData.series) return;
    countCapture(chartData.series, chartData.methods, capture);
    draw();
    resync();
  };
  // Captures that arrive between two frames go on the page together: one layout per frame at any rate.
  let arrived = [];
  let flushing = false;
  const flush = () => {
    flushing = false;
    const batch = arrived;
    arrived = [];
    for (const event of batch) {
      streamed.add(event.id);
      if (!seen.has(event.id)) counted(event);
      add(event);
    }
    // Only captures that may have raced the first page load need remembering.
    for (const id of streamed) {
      if (streamed.size <= LIMIT) break;
      streamed.delete(id);
    }
  };
  const stream = follow(`/webhooks/${webhookId}/stream`, {
    onState: (s) => {
      state.textContent = s;
      state.className = `state state-${s}`;
    },
    onEvent: (event) => {
      if (event.type === 'stream.lagged') {
        stream.reconnect();
        return;
      }
      if (event.type !== 'request.captured') return;
      if (searching) {
        missed += 1;
        newer.hidden = false;
        newer.textContent = `${missed} new since the search; clear it to see them.`;
        return;
      }
      arrived.push(event);
      if (!flushing) {
        flushing = true;
        requestAnimationFrame(flush);
      }
    },
  });

  const q = h('input', {
    type: 'search',
    id: 'search',
    name: 'q',
    placeholder: 'method:POST header.x-github-event:push signature:invalid',
    'aria-label': 'Search captures',
  });
  const method = h(
    'select',
    { 'aria-label': 'Method' },
    ['', 'GET', 'POST', 'PUT', 'PATCH', 'DELETE'].map((m) => h('option', { value: m }, m || 'any method')),
  );
  const contains = h('input', { type: 'text', placeholder: 'body contains', 'aria-label': 'Body contains' });
  const verdict = h(
    'select',
    { id: 'signature-filter', 'aria-label': 'Signature' },
    ['', 'valid', 'invalid', 'missing', 'duplicate', 'unverified'].map((v) =>
      h('option', { value: v }, v || 'any signature'),
    ),
  );
  const search = h(
    'form',
    { class: 'search', role: 'search' },
    q,
    method,
    contains,
    verdict,
    h('button', { type: 'submit' }, 'Search'),
    h(
      'button',
      {
        type: 'button',
        onclick: () => {
          q.value = '';
          contains.value = '';
          method.value = '';
          verdict.value = '';
          reload();
        },
      },
      'Clear',
    ),
  );
  const reload = async () => {
    const filter = {};
    if (method.value) filter.methods = [method.value];
    if (contains.value) filter.body_contains = contains.value;
    if (verdict.value) filter.signatures = [verdict.value];
    searching = Boolean(q.value.trim() || method.value || contains.value || verdict.value);
    missed = 0;
    newer.hidden = true;
    try {
      const page = searching
        ? await call('POST', `/webhooks/${webhookId}/requests/search`, {
            q: q.value.trim() || undefined,
            filter,
            limit: LIMIT,
          })
        : await call('GET', `/webhooks/${webhookId}/requests?limit=${LIMIT}`);
      // Captures the stream brought while the page loaded stay; a search shows only its results.
      const kept = searching ? [] : [...streamed].map((id) => seen.get(id)).filter(Boolean);
      list.replaceChildren();
      seen.clear();
      page.items.forEach(add);
      kept.forEach(add);
      error.show('');
    } catch (e) {
      error.show(e);
    }
  };
  search.addEventListener('submit', (event) => {
    event.preventDefault();
    reload();
  });

  fill(
    main,
    h('div', { class: 'page-head' }, h('h1', {}, webhook.name), state),
    h(
      'p',
      { class: 'url' },
      'Capture URL: ',
      h('code', { id: 'capture-url' }, webhook.capture_url),
      ' ',
      copyButton('Copy', webhook.capture_url),
    ),
    charts,
    search,
    error,
    newer,
    h('div', { class: 'inspector' }, list, detail),
    triggers,
    destinations,
    rulesTester(webhook),
  );
  await Promise.all([
    reload(),
    showTriggers(triggers, webhook).catch((e) => fill(triggers, h('p', { class: 'notice notice-error' }, e.message))),
    showDestinations(destinations, webhook).catch((e) =>
      fill(destinations, h('p', { class: 'notice notice-error' }, e.message)),
    ),
  ]);
  chartFigures(webhookId)
    .then((figures) => {
      Object.assign(chartData, figures);
      draw();
    })
    .catch(() => {});
  return () => {
    stream.stop();
    clearTimeout(resyncing);
  };
}

/** The server's figures for the charts: requests per hour over 24 h, and by method. */
async function chartFigures(webhookId) {
  const [series, methods] = await Promise.all([
    call('GET', `/webhooks/${webhookId}/analytics/volume?bucket=hour`),
    call('GET', `/webhooks/${webhookId}/analytics/methods`),
  ]);
  return { series, methods };
}

/** Counts one streamed capture in figures the server answered before it was stored. */
function countCapture(series, methods, capture) {
  const at = Date.parse(capture.received_at);
  const point = series.points.findLast((p) => Date.parse(p.t) <= at);
  if (!point) return;
  point.count += 1;
  series.total += 1;
  const row = methods.methods.find((m) => m.method === capture.method);
  if (row) row.count += 1;
  else methods.methods.push({ method: capture.method, count: 1, share: 0 });
  methods.total += 1;
  for (const m of methods.methods) m.share = m.count / methods.total;
  methods.methods.sort((a, b) => b.count - a.count);
}

function drawCharts(el, series, methods) {
  const byMethod = methods.methods.map((m) => `${m.method} ${m.count}`).join(', ');
  fill(
    el,
    h(
      'figure',
      {},
      volume(series.points, `Requests per hour, last 24 hours: ${series.total} in all`),
      h('figcaption', { id: 'volume-total' }, `${series.total} requests in 24 h`),
    ),
    h(
      'figure',
      {},
      breakdown(methods.methods, `Requests by method: ${byMethod || 'none'}`),
      h('figcaption', { id: 'method-totals' }, byMethod ? `By method: ${byMethod}` : 'By method: none yet'),
    ),
  );
}
