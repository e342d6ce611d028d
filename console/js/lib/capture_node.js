// @ts-check
// A captured request as a flow's request node ("Add to flow"): its method, path, query, headers and body, sent to
// `{{base_url}}<path>` so the person points it at their API by setting `base_url` (or edits the URL).

import { uniqueId } from './flow_model.js';

/** Headers the capture's transport set, not its sender's message: a new request sets its own. */
const TRANSPORT = new Set([
  'host',
  'content-length',
  'connection',
  'transfer-encoding',
  'keep-alive',
  'te',
  'upgrade',
  'accept-encoding',
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-real-ip',
]);

/**
 * A node id from `wanted` (ids are letters, digits, `_` and `-`), unique among `taken`.
 * @param {string} wanted
 * @param {Iterable<string>} taken
 */
export function tidyId(wanted, taken) {
  const base =
    wanted
      .toLowerCase()
      .replace(/[^a-z0-9_-]+/g, '_')
      .replace(/^_+|_+$/g, '')
      .slice(0, 40) || 'request';
  return uniqueId(base, new Set(taken));
}

/**
 * The request node for `capture`, with an id not in `taken`, and what the person should know about it.
 * @param {{ method: string, path: string, query_string?: string | null, query: Record<string, string[]>,
 *   headers: [string, string][], body?: string | null, body_encoding: string, body_size: number }} capture
 * @param {Iterable<string>} [taken]
 * @returns {{ node: Record<string, any>, notes: string[] }}
 */
export function captureToNode(capture, taken = []) {
  const notes = [];
  const path = capture.path || '/';
  const repeated = Object.values(capture.query || {}).some((values) => values.length > 1);
  /** @type {Record<string, string>} */
  const query = {};
  if (!repeated) for (const [name, values] of Object.entries(capture.query || {})) query[name] = values[0] ?? '';
  /** @type {Record<string, string>} */
  const headers = {};
  for (const [name, value] of capture.headers) {
    const key = name.toLowerCase();
    if (TRANSPORT.has(key)) continue;
    // A repeated header is sent once with its values joined, as HTTP allows for list-valued fields.
    headers[key] = key in headers ? `${headers[key]}, ${value}` : value;
  }
  const suffix = `${path}${repeated && capture.query_string ? `?${capture.query_string}` : ''}`;
  /** @type {Record<string, any>} */
  const request = { method: capture.method, url: `{{base_url}}${suffix}`, headers, query };
  if (capture.body_size > 0 && capture.body_encoding === 'utf8') request.body = capture.body;
  else if (capture.body_size > 0) notes.push('The body is binary: the node sends none. Add one in the editor.');
  const copied = [suffix, ...Object.entries(query).flat(), ...Object.entries(headers).flat(), request.body || ''];
  if (copied.some((text) => text.includes('{{'))) {
    notes.push('The request holds "{{", which flows read as a variable: check the node before running it.');
  }
  const node = {
    id: tidyId(`${capture.method}_${path.split('/').filter(Boolean).pop() || 'root'}`, taken),
    kind: 'request',
    name: `${capture.method} ${path}`,
    request,
    extractors: [{ name: 'status', kind: 'statusCode' }],
    assertions: [{ source: 'status', operator: 'lessThan', expected: 400 }],
  };
  return { node, notes };
}
