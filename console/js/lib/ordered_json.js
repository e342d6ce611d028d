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

/** A reader of one JSON text, from the start. */
class Reader {
  constructor(text) {
    this.text = text;
    this.at = 0;
  }

  fail(what) {
    throw new SyntaxError(`${what} at ${place(this.text, this.at)}`);
  }

  space() {
    while (this.at < this.text.length && ' \t\n\r'.includes(this.text[this.at])) this.at += 1;
  }

  string() {
    const { text } = this;
    const start = this.at;
    this.at += 1;
    while (this.at < text.length && text[this.at] !== '"') {
      if (text.charCodeAt(this.at) < 0x20) this.fail('a control character inside a string');
      this.at += text[this.at] === '\\' ? 2 : 1;
    }
    if (this.at >= text.length) this.fail('an unterminated string');
    this.at += 1;
    try {
      return JSON.parse(text.slice(start, this.at));
    } catch {
      this.at = start;
      return this.fail('a bad escape in a string');
    }
  }

  value() {
    this.space();
    const c = this.text[this.at];
    if (c === '{') return this.object();
    if (c === '[') return this.array();
    if (c === '"') return this.string();
    for (const [word, meaning] of LITERALS) {
      if (this.text.startsWith(word, this.at)) {
        this.at += word.length;
        return meaning;
      }
    }
    const number = /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
    number.lastIndex = this.at;
    const found = number.exec(this.text);
    if (!found)
      return this.fail(this.at >= this.text.length ? 'the text ends where a value belongs' : `unexpected "${c}"`);
    this.at += found[0].length;
    return Number(found[0]);
  }

  /** After an item of an object or array: answers whether the container ends here. */
  next(close) {
    this.space();
    if (this.text[this.at] === ',') {
      this.at += 1;
      return false;
    }
    if (this.text[this.at] === close) {
      this.at += 1;
      return true;
    }
    return this.fail(`"," or "${close}" expected`);
  }

  /** Whether the container opened here is empty (and then reads its end). */
  empty(close) {
    this.at += 1;
    this.space();
    if (this.text[this.at] !== close) return false;
    this.at += 1;
    return true;
  }

  object() {
    const out = {};
    if (this.empty('}')) return out;
    do {
      this.space();
      if (this.text[this.at] !== '"') this.fail('a key (in double quotes) expected');
      const name = this.string();
      this.space();
      if (this.text[this.at] !== ':') this.fail('":" expected');
      this.at += 1;
      put(out, name, this.value());
    } while (!this.next('}'));
    return out;
  }

  array() {
    const out = [];
    if (this.empty(']')) return out;
    do out.push(this.value());
    while (!this.next(']'));
    return out;
  }
}

/**
 * Parses JSON text (RFC 8259) keeping each object's key order; throws a SyntaxError that says where.
 * @param {string} text
 */
export function parse(text) {
  const reader = new Reader(text);
  const result = reader.value();
  reader.space();
  if (reader.at < text.length) reader.fail('text after the value');
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
