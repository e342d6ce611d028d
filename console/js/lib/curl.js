// @ts-check
// A captured request as a curl command line (pure: no DOM), so the quoting can be tested alone.

/**
 * A shell word: single quotes, with each inner quote closed, escaped and reopened.
 * @param {unknown} text
 */
export function quote(text) {
  return `'${String(text).replace(/'/g, `'\\''`)}'`;
}

/** Headers curl sets itself or that would break the resend. */
const SKIPPED = ['host', 'content-length', 'connection'];

/**
 * The capture as a curl command line that sends it again to `captureUrl`.
 * @param {string} captureUrl the endpoint's capture URL
 * @param {{ method: string, path: string, query_string?: string | null, headers: [string, string][],
 *   body?: string | null, body_size: number, body_encoding: string }} capture
 */
export function asCurl(captureUrl, capture) {
  const url = `${captureUrl}${capture.path}${capture.query_string ? `?${capture.query_string}` : ''}`;
  const parts = ['curl', '-X', capture.method, quote(url)];
  for (const [name, value] of capture.headers) {
    if (SKIPPED.includes(name.toLowerCase())) continue;
    parts.push('-H', quote(`${name}: ${value}`));
  }
  // `--data-raw`, never `--data-binary`/`-d`: those read a file when the value starts with `@`, and a sender
  // chooses the body (a captured `@/home/me/.ssh/id_ed25519` would post that file wherever it is pasted).
  if (capture.body_size > 0 && capture.body_encoding === 'utf8') parts.push('--data-raw', quote(capture.body));
  const line = parts.join(' ');
  if (capture.body_size > 0 && capture.body_encoding === 'base64') {
    return `printf %s ${quote(capture.body)} | base64 -d | ${line} --data-binary @-`;
  }
  return line;
}
