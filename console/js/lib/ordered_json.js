// @ts-check
// JSON text to values and back with every object's keys in the order they were written. A JavaScript object lists
// integer-like keys ("2", "10") first, in numeric order, whatever order they were added in; so this parser stores
// such a key (and any key that begins with the marker) behind an invisible marker, and `stringify` takes it off.
// Code that reads or writes keys chosen by people goes through `get`, `put`, `drop`, `names` and `entries`.

/** Marks a stored key that would otherwise move (U+E000, a private-use character). */
const MARK = '\uE000';

/** The key under which `name` is stored. */
export function keyOf(name) {
  return /^(0|[1-9][0-9]*)$/.test(name) || name.startsWith(MARK) ? MARK + name : name;
}

/** The name a stored key stands for. */
export function nameOf(key) {
  return key.startsWith(MARK) ? key.slice(1) : key;
}

/** Sets `name` on `object`: in place when present, at the end otherwise (even `__proto__`, as a plain key). */
export function put(object, name, value) {
  Object.defineProperty(object, keyOf(name), { value, writable: true, enumerable: true, configurable: true });
  return object;
}

/** The value of `name` in `object`, or undefined. */
export function get(object, name) {
  const key = keyOf(name);
  return object && Object.prototype.hasOwnProperty.call(object, key) ? object[key] : undefined;
}

/** Whether `object` holds `name`. */
export function has(object, name) {
  return Boolean(object) && Object.prototype.hasOwnProperty.call(object, keyOf(name));
}

/** Removes `name` from `object`. */
export function drop(object, name) {
  delete object[keyOf(name)];
}

/** The names of `object`, in order. */
export function names(object) {
  return Object.keys(object || {}).map(nameOf);
}

/** `[name, value]` of `object`, in order. */
export function entries(object) {
  return Object.keys(object || {}).map((key) => [nameOf(key), object[key]]);
}

/** Whether `value` is a JSON object (not an array, not null). */
export function isObject(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** @type {[string, boolean | null][]} */
const LITERALS = [
  ['true', true],
  ['false', false],
  ['null', null],
];

/** Where `at` is in `text`, as "line L column C". */
function place(text, at) {
  const before = text.slice(0, at).split('\n');
  return `line ${before.length} column ${before[before.length - 1].length + 1}`;
}

/**
 * Parses JSON text (RFC 8259) keeping each object's key order; throws a SyntaxError that says where.
 * @param {string} text
 */
export function parse(text) {
  let at = 0;
  const fail = (what) => {
    throw new SyntaxError(`${what} at ${place(text, at)}`);
  };
  const space = () => {
    while (at < text.length && ' \t\n\r'.includes(text[at])) at += 1;
  };
  const string = () => {
    const start = at;
    at += 1;
    while (at < text.length && text[at] !== '"') {
      if (text.charCodeAt(at) < 0x20) fail('a control character inside a string');
      at += text[at] === '\\' ? 2 : 1;
    }
    if (at >= text.length) fail('an unterminated string');
    at += 1;
    try {
      return JSON.parse(text.slice(start, at));
    } catch {
      at = start;
      return fail('a bad escape in a string');
    }
  };
  const value = () => {
    space();
    const c = text[at];
    if (c === '{') return object();
    if (c === '[') return array();
    if (c === '"') return string();
    for (const [word, meaning] of LITERALS) {
      if (text.startsWith(word, at)) {
        at += word.length;
        return meaning;
      }
    }
    const number = /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
    number.lastIndex = at;
    const found = number.exec(text);
    if (!found) return fail(at >= text.length ? 'the text ends where a value belongs' : `unexpected "${c}"`);
    at += found[0].length;
    return Number(found[0]);
  };
  const object = () => {
    const out = {};
    at += 1;
    space();
    if (text[at] === '}') {
      at += 1;
      return out;
    }
    for (;;) {
      space();
      if (text[at] !== '"') fail('a key (in double quotes) expected');
      const name = string();
      space();
      if (text[at] !== ':') fail('":" expected');
      at += 1;
      put(out, name, value());
      space();
      if (text[at] === ',') at += 1;
      else if (text[at] === '}') {
        at += 1;
        return out;
      } else fail('"," or "}" expected');
    }
  };
  const array = () => {
    const out = [];
    at += 1;
    space();
    if (text[at] === ']') {
      at += 1;
      return out;
    }
    for (;;) {
      out.push(value());
      space();
      if (text[at] === ',') at += 1;
      else if (text[at] === ']') {
        at += 1;
        return out;
      } else fail('"," or "]" expected');
    }
  };
  const result = value();
  space();
  if (at < text.length) fail('text after the value');
  return result;
}

/**
 * JSON text of `value` as `JSON.stringify(value, null, indent)` writes it, with stored keys turned back into their
 * names. `indent` 0 writes it on one line.
 */
export function stringify(value, indent = 2) {
  const pad = ' '.repeat(indent);
  const write = (v, depth) => {
    if (v === null || typeof v === 'function' || typeof v === 'symbol') return v === null ? 'null' : undefined;
    if (typeof v === 'number') return Number.isFinite(v) ? String(v) : 'null';
    if (typeof v === 'boolean' || typeof v === 'string') return JSON.stringify(v);
    if (v === undefined) return undefined;
    const inner = pad ? `\n${pad.repeat(depth + 1)}` : '';
    const outer = pad ? `\n${pad.repeat(depth)}` : '';
    if (Array.isArray(v)) {
      if (!v.length) return '[]';
      return `[${inner}${v.map((x) => write(x, depth + 1) ?? 'null').join(`,${inner}`)}${outer}]`;
    }
    const parts = [];
    for (const key of Object.keys(v)) {
      const text = write(v[key], depth + 1);
      if (text !== undefined) parts.push(`${JSON.stringify(nameOf(key))}:${pad ? ' ' : ''}${text}`);
    }
    return parts.length ? `{${inner}${parts.join(`,${inner}`)}${outer}}` : '{}';
  };
  return write(value, 0);
}

/** A deep copy of `value` (objects keep their order). */
export function copy(value) {
  return parse(stringify(value, 0));
}
