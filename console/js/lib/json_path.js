// @ts-check
// JSONPath (RFC 9535) normalized paths for a value's place in a document: `$.data[0].id`, with bracket quotes for
// names that are not plain identifiers (`$['x-id']`, `$['it\'s']`, control characters escaped as the RFC asks).

const PLAIN = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SHORT = { '\\': '\\\\', "'": "\\'", '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * A member name in a single-quoted JSONPath string.
 * @param {string} name
 */
function quoted(name) {
  const escaped = name.replace(
    /[\\'\u0000-\u001f]/g,
    (c) => SHORT[c] || `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  return `'${escaped}'`;
}

/**
 * The path of the value reached by `segments` (object member names and array indexes) from the root:
 * `['data', 0, 'id']` gives `$.data[0].id`.
 * @param {(string | number)[]} segments
 */
export function jsonPath(segments) {
  return `$${segments.map((s) => (typeof s === 'number' ? `[${s}]` : PLAIN.test(s) ? `.${s}` : `[${quoted(s)}]`)).join('')}`;
}
