// @ts-check
// JSONPath (RFC 9535) normalized paths for a value's place in a document: `$.data[0].id`, with bracket quotes for
// names that are not plain identifiers (`$['x-id']`, `$['it\'s']`).

const PLAIN = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The path of the value reached by `segments` (object member names and array indexes) from the root.
 * @param {(string | number)[]} segments
 */
export function jsonPath(segments) {
  let path = '$';
  for (const segment of segments) {
    if (typeof segment === 'number') path += `[${segment}]`;
    else if (PLAIN.test(segment)) path += `.${segment}`;
    else path += `['${segment.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}']`;
  }
  return path;
}
