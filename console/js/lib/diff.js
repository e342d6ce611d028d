// @ts-check
// "Compare" two captures: headers by name (case-insensitive, repeats kept in order), JSON bodies by the path of
// each value that differs, other bodies line by line. Bounded: captures are attacker-controlled, so walks stop at
// a depth and a count, and text diffs at a size, saying so instead of freezing the page.

import { jsonPath } from './json_path.js';

/** @typedef {{ path: string, kind: 'added' | 'removed' | 'changed', left?: any, right?: any }} Change */

export const LIMITS = { depth: 64, visits: 200_000, changes: 500, lines: 2_000 };

/**
 * Header rows: each name once (lower case), with the values on each side (joined with ", " when repeated).
 * @param {[string, string][]} left
 * @param {[string, string][]} right
 * @returns {{ name: string, left: string | null, right: string | null, same: boolean }[]}
 */
export function diffHeaders(left, right) {
  const collect = (headers) => {
    /** @type {Map<string, string[]>} */
    const map = new Map();
    for (const [name, value] of headers) {
      const key = name.toLowerCase();
      map.set(key, [...(map.get(key) || []), value]);
    }
    return map;
  };
  const a = collect(left);
  const b = collect(right);
  const names = [...new Set([...a.keys(), ...b.keys()])];
  return names.map((name) => {
    const l = a.has(name) ? a.get(name).join(', ') : null;
    const r = b.has(name) ? b.get(name).join(', ') : null;
    return { name, left: l, right: r, same: l === r };
  });
}

/**
 * The differences between two JSON values, by path; `truncated` when a limit stopped the walk.
 * @param {any} left
 * @param {any} right
 * @returns {{ changes: Change[], truncated: boolean }}
 */
export function diffJson(left, right) {
  /** @type {Change[]} */
  const changes = [];
  let visits = 0;
  let truncated = false;
  /** @param {any} a @param {any} b @param {(string | number)[]} at */
  const walk = (a, b, at) => {
    if (truncated) return;
    if ((visits += 1) > LIMITS.visits || changes.length >= LIMITS.changes || at.length > LIMITS.depth) {
      truncated = true;
      return;
    }
    const kindA = kindOf(a);
    if (kindA !== kindOf(b) || (kindA !== 'object' && kindA !== 'array')) {
      if (!Object.is(a, b)) changes.push({ path: jsonPath(at), kind: 'changed', left: a, right: b });
      return;
    }
    if (kindA === 'array') {
      for (let i = 0; i < Math.max(a.length, b.length); i += 1) {
        if (i >= a.length) changes.push({ path: jsonPath([...at, i]), kind: 'added', right: b[i] });
        else if (i >= b.length) changes.push({ path: jsonPath([...at, i]), kind: 'removed', left: a[i] });
        else walk(a[i], b[i], [...at, i]);
        if (truncated) return;
      }
      return;
    }
    for (const key of Object.keys(a)) {
      if (!Object.hasOwn(b, key)) changes.push({ path: jsonPath([...at, key]), kind: 'removed', left: a[key] });
      else walk(a[key], b[key], [...at, key]);
      if (truncated) return;
    }
    for (const key of Object.keys(b)) {
      if (!Object.hasOwn(a, key)) changes.push({ path: jsonPath([...at, key]), kind: 'added', right: b[key] });
    }
  };
  walk(left, right, []);
  if (changes.length > LIMITS.changes) {
    changes.length = LIMITS.changes;
    truncated = true;
  }
  return { changes, truncated };
}

/** @param {any} value */
function kindOf(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

/**
 * A line diff (longest common subsequence): each line kept, removed from the left or added on the right. Null
 * when either side has more lines than the limit.
 * @param {string} left
 * @param {string} right
 * @returns {{ kind: 'same' | 'removed' | 'added', line: string }[] | null}
 */
export function diffLines(left, right) {
  const a = left.split('\n');
  const b = right.split('\n');
  if (a.length > LIMITS.lines || b.length > LIMITS.lines) return null;
  // lengths[i][j]: the common subsequence of a[i..] and b[j..].
  const lengths = Array.from({ length: a.length + 1 }, () => new Uint16Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i -= 1) {
    for (let j = b.length - 1; j >= 0; j -= 1) {
      lengths[i][j] = a[i] === b[j] ? lengths[i + 1][j + 1] + 1 : Math.max(lengths[i + 1][j], lengths[i][j + 1]);
    }
  }
  /** @type {{ kind: 'same' | 'removed' | 'added', line: string }[]} */
  const out = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ kind: 'same', line: a[i] });
      i += 1;
      j += 1;
    } else if (lengths[i + 1][j] >= lengths[i][j + 1]) out.push({ kind: 'removed', line: a[i++] });
    else out.push({ kind: 'added', line: b[j++] });
  }
  while (i < a.length) out.push({ kind: 'removed', line: a[i++] });
  while (j < b.length) out.push({ kind: 'added', line: b[j++] });
  return out;
}
