// @ts-check
// The editor's calls that carry a definition as its exact text: `call` writes bodies with JSON.stringify, which
// would move integer-like keys first, so these send the text the model wrote (with the session, refreshed once on
// 401 as `call` does) and read answers with the order-keeping parser.

import { call, authHeaders, refresh, refusal } from '../api.js';
import { parse, stringify } from '../lib/ordered_json.js';

/**
 * Sends `body` (values read with the order-keeping parser, written back as they are) to `path`; answers the
 * answer read the same way (null for 204).
 * @param {string} method
 * @param {string} path
 * @param {any} body
 * @param {Record<string, string>} [headers]
 */
export async function send(method, path, body, headers = {}) {
  const text = stringify(body, 0);
  const once = () =>
    fetch(path, {
      method,
      headers: { ...authHeaders(path), ...headers, 'Content-Type': 'application/json' },
      credentials: 'same-origin',
      body: text,
    });
  let response = await once();
  if (response.status === 401) {
    try {
      await refresh();
      response = await once();
    } catch {
      window.dispatchEvent(new Event('hookflow:signed-out'));
    }
  }
  if (!response.ok) throw await refusal(response);
  if (response.status === 204) return null;
  return parse(await response.text());
}

/** GETs `path` and reads the answer with the order-keeping parser. */
export async function read(path) {
  const response = await call('GET', path, undefined, { raw: true });
  return parse(await response.text());
}
