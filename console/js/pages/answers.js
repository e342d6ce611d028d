// @ts-check
// How an endpoint answers its senders (#51), in its form: the response rules as an ordered list with a form per rule
// (method, path template, q, status, headers, body template, delay), the handshake picker (the secret written once,
// never shown) and the CORS settings; and the "test this request" box of the endpoint's page, which asks
// `rules/test` which rule would answer a request and what.

import { h, field, fill, notice } from '../dom.js';
import { call } from '../api.js';
import { parseHeaders, headerLines } from '../lib/header_lines.js';

export const PRESETS = ['slack', 'meta', 'msgraph', 'zoom', 'dropbox', 'twitter', 'twitch', 'smartsheet', 'trello'];
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

/** One rule's form as a list item; `ruleValue()` answers the rule as the API takes it. */
function ruleItem(rule) {
  const method = h(
    'select',
    { name: 'rule-method' },
    h('option', { value: '' }, 'any method'),
    METHODS.map((m) => h('option', { value: m }, m)),
  );
  method.value = rule.method || '';
  const text = (name, value, attrs = {}) => h('input', { name, value: value ?? '', ...attrs });
  const name = text('rule-name', rule.name, { maxlength: 200, placeholder: 'a label' });
  const path = text('rule-path', rule.path, { maxlength: 1024, placeholder: '/orders/{id} (empty: any path)' });
  const q = text('rule-q', rule.q, { maxlength: 4096, placeholder: 'header.x-tier:gold (empty: any request)' });
  const status = text('rule-status', rule.status ?? 200, { type: 'number', min: 200, max: 599, required: true });
  const headers = h('textarea', { name: 'rule-headers', rows: 2, class: 'code' }, headerLines(rule.headers));
  const body = h('textarea', { name: 'rule-body', rows: 3, class: 'code', maxlength: 65536 }, rule.body || '');
  const delay = text('rule-delay', rule.delay_ms ?? '', { type: 'number', min: 0, max: 30000, placeholder: '0' });
  const item = h('li', { class: 'rule stack' });
  const move = (by) => {
    const list = item.parentElement;
    if (!list) return;
    const siblings = [...list.children];
    const to = siblings.indexOf(item) + by;
    if (to < 0 || to >= siblings.length) return;
    if (by < 0) list.insertBefore(item, siblings[to]);
    else list.insertBefore(item, siblings[to].nextSibling);
  };
  item.append(
    h(
      'div',
      { class: 'row-actions' },
      h('button', { type: 'button', class: 'small', title: 'Move up', onclick: () => move(-1) }, '↑'),
      h('button', { type: 'button', class: 'small', title: 'Move down', onclick: () => move(1) }, '↓'),
      h('button', { type: 'button', class: 'small danger', onclick: () => item.remove() }, 'Remove'),
    ),
    field('Label', name),
    field('Method', method, 'GET also answers HEAD, without a body.'),
    field('Path template', path, 'Relative to the capture URL; {name} is one segment, * last matches the rest.'),
    field('Matches (q)', q, 'The search language, as in a search.'),
    field('Status', status),
    field('Headers', headers, 'One "Name: value" a line: Content-Type, Content-Language, Retry-After, X-…'),
    field('Body template', body, '{{request.params.id}}, {{request.query.x}}, {{request.body.$.a}}, {{request.id}}…'),
    field('Delay (ms)', delay),
  );
  /** @type {any} */ (item).ruleValue = () => {
    /** @type {Record<string, any>} */
    const out = { status: Number(status.value) };
    if (name.value.trim()) out.name = name.value.trim();
    if (method.value) out.method = method.value;
    if (path.value.trim()) out.path = path.value.trim();
    if (q.value.trim()) out.q = q.value.trim();
    // A structured filter set through the API is kept as it is.
    if (rule.filter) out.filter = rule.filter;
    const parsed = parseHeaders(headers.value);
    if (Object.keys(parsed).length) out.headers = parsed;
    if (body.value) out.body = body.value;
    if (delay.value !== '') out.delay_ms = Number(delay.value);
    return out;
  };
  return item;
}

/** The answering part of an endpoint's form; `value()` answers the fields to send (`rules`, `handshake`, `cors`),
 * leaving out what is unchanged. */
export function answerFields(webhook) {
  const current = webhook || {};
  const rules = h('ol', { id: 'rules', class: 'rules' });
  for (const rule of current.rules || []) rules.append(ruleItem(rule));
  const addRule = h(
    'button',
    { type: 'button', id: 'add-rule', class: 'small', onclick: () => rules.append(ruleItem({ status: 200 })) },
    'Add a rule',
  );
  const preset = h(
    'select',
    { name: 'handshake', id: 'handshake-preset' },
    h('option', { value: '' }, 'none'),
    PRESETS.map((p) => h('option', { value: p }, p)),
  );
  preset.value = current.handshake ? current.handshake.preset : '';
  const secret = h('input', { type: 'password', name: 'handshake-secret', autocomplete: 'off', maxlength: 256 });
  const kept =
    current.handshake && current.handshake.secret_set
      ? 'A secret is stored; leave empty to keep it (changing the preset drops it).'
      : 'Zoom, X, Twitch, Meta (verify token), Slack (signing secret). Shown once: never displayed again.';
  const cors = current.cors || null;
  const origins = h(
    'textarea',
    { name: 'cors-origins', rows: 2, placeholder: 'https://app.example.com (one a line, or *)' },
    cors ? cors.allow_origins.join('\n') : '',
  );
  const allowHeaders = h('input', {
    name: 'cors-headers',
    placeholder: 'Content-Type, X-Token',
    value: cors && cors.allow_headers ? cors.allow_headers.join(', ') : '',
  });
  const maxAge = h('input', {
    type: 'number',
    name: 'cors-max-age',
    min: 0,
    max: 86400,
    value: cors && cors.max_age_s !== undefined ? cors.max_age_s : '',
  });
  const part = h(
    'div',
    { class: 'stack', id: 'answers' },
    h('fieldset', { class: 'stack' }, h('legend', {}, 'Response rules (the first match answers)'), rules, addRule),
    h(
      'fieldset',
      { class: 'stack' },
      h('legend', {}, 'Provider handshake'),
      field('Preset', preset),
      field('Secret', secret, kept),
    ),
    h(
      'fieldset',
      { class: 'stack' },
      h('legend', {}, 'CORS'),
      field('Allowed origins', origins),
      field('Allowed request headers', allowHeaders),
      field('Preflight max age (s)', maxAge, 'Default 600.'),
    ),
  );
  const same = (a, b) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
  const value = () => {
    /** @type {Record<string, any>} */
    const out = {};
    const written = [...rules.children].map((item) => /** @type {any} */ (item).ruleValue());
    const newRules = written.length ? written : null;
    if (!same(newRules, current.rules)) out.rules = newRules;
    const was = current.handshake ? current.handshake.preset : '';
    if (!preset.value) {
      if (was) out.handshake = null;
    } else if (preset.value !== was || secret.value) {
      out.handshake = secret.value ? { preset: preset.value, secret: secret.value } : { preset: preset.value };
    }
    const list = origins.value
      .split('\n')
      .map((o) => o.trim())
      .filter(Boolean);
    /** @type {Record<string, any> | null} */
    let newCors = null;
    if (list.length) {
      newCors = { allow_origins: list };
      const names = allowHeaders.value
        .split(',')
        .map((n) => n.trim())
        .filter(Boolean);
      if (names.length) newCors.allow_headers = names;
      if (maxAge.value !== '') newCors.max_age_s = Number(maxAge.value);
    }
    if (!same(newCors, cors)) out.cors = newCors;
    return out;
  };
  return { part, value };
}

/** The "test this request" box: which rule would answer a request to the capture URL, and what. */
export function rulesTester(webhook) {
  const error = notice();
  const method = h(
    'select',
    { name: 'test-method', id: 'test-method' },
    METHODS.map((m) => h('option', { value: m }, m)),
  );
  method.value = 'POST';
  const path = h('input', { name: 'test-path', id: 'test-path', value: '/', maxlength: 2048 });
  const query = h('input', { name: 'test-query', id: 'test-query', placeholder: 'a=1&b=2', maxlength: 8192 });
  const headers = h('textarea', { name: 'test-headers', id: 'test-headers', rows: 2, class: 'code' });
  const body = h('textarea', { name: 'test-body', id: 'test-body', rows: 3, class: 'code' });
  const result = h('div', { id: 'test-result', 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'stack' },
    error,
    field('Method', method),
    field('Path', path, 'Relative to the capture URL.'),
    field('Query', query),
    field('Headers', headers, 'One "Name: value" a line.'),
    field('Body', body),
    h('button', { type: 'submit', id: 'test-request' }, 'Test this request'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      /** @type {Record<string, any>} */
      const request = { method: method.value, path: path.value || '/' };
      if (query.value) request.query = query.value;
      const parsed = parseHeaders(headers.value);
      if (Object.keys(parsed).length) request.headers = parsed;
      if (body.value) request.body = body.value;
      const r = await call('POST', `/webhooks/${webhook.id}/rules/test`, request);
      const rule = r.rule_index === null ? null : (webhook.rules || [])[r.rule_index];
      const who =
        r.rule_index === null
          ? 'No rule answers: the endpoint’s own answer.'
          : `Rule ${r.rule_index + 1}${rule && rule.name ? ` (${rule.name})` : ''} answers.`;
      fill(
        result,
        h('p', { id: 'test-rule', 'data-rule': r.rule_index === null ? '' : String(r.rule_index) }, who),
        h('p', {}, 'Status ', h('strong', { id: 'test-status' }, String(r.status))),
        h('pre', { id: 'test-answer-headers', class: 'code' }, headerLines(r.headers)),
        h('pre', { id: 'test-answer-body', class: 'code' }, r.body),
      );
    } catch (e) {
      error.show(e);
    }
  });
  return h(
    'section',
    { id: 'rules-test', class: 'rules-test', 'aria-label': 'Test a request' },
    h('h2', {}, 'What would the capture URL answer?'),
    h(
      'p',
      { class: 'muted' },
      webhook.rules && webhook.rules.length
        ? `${webhook.rules.length} rule(s), tried in order${webhook.mock_of ? '; a mock answers 404 where none matches' : ''}.`
        : 'No rules: the endpoint answers with its response or the receipt.',
    ),
    form,
    result,
  );
}
