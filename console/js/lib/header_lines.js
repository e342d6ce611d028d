// @ts-check
// Headers as people type them in the app's forms: one `Name: value` a line, to and from a `{name: value}` map.

/** `Name: value` lines as a header map (blank lines skipped). */
export function parseHeaders(text) {
  /** @type {Record<string, string>} */
  const headers = {};
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const at = line.indexOf(':');
    if (at < 1) throw new Error(`"${line.trim()}" is not a header: write "Name: value"`);
    headers[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return headers;
}

/** A header map as `Name: value` lines. */
export function headerLines(headers) {
  return Object.entries(headers || {})
    .map(([name, value]) => `${name}: ${value}`)
    .join('\n');
}
