// @ts-check
// Ordered JSON: text back byte for byte, integer-like keys where they were written, JSON.stringify's layout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, stringify, put, get, drop, names, entries, copy } from '../js/lib/ordered_json.js';

test('keys come back in the order written, integer-like ones too', () => {
  const text = '{\n  "z": 1,\n  "10": "ten",\n  "a": {\n    "2": true,\n    "1": null\n  },\n  "0": []\n}';
  const value = parse(text);
  assert.equal(stringify(value), text);
  assert.deepEqual(names(value), ['z', '10', 'a', '0']);
  assert.deepEqual(entries(value.a), [
    ['2', true],
    ['1', null],
  ]);
  assert.equal(get(value, '10'), 'ten');
});

test("the layout is JSON.stringify's, for every kind of value", () => {
  const samples = [
    { nodes: [], layout: {}, s: 'a "quote" \\ \n \u2028 é 😀', n: [0, -1.5, 1e21, 3.25e-7], b: [true, false, null] },
    [[], {}, [[1]], { a: { b: { c: [] } } }],
    'plain',
    42,
    null,
  ];
  for (const sample of samples) {
    for (const indent of [0, 2, 4]) {
      assert.equal(
        stringify(parse(JSON.stringify(sample, null, indent)), indent),
        JSON.stringify(sample, null, indent),
      );
    }
  }
});

test('a key named __proto__ is a key, not a prototype', () => {
  const value = parse('{"__proto__": {"polluted": true}, "b": 1}');
  assert.equal(/** @type {any} */ ({}).polluted, undefined);
  assert.equal(Object.getPrototypeOf(value), Object.prototype);
  assert.deepEqual(names(value), ['__proto__', 'b']);
  assert.equal(stringify(value, 0), '{"__proto__":{"polluted":true},"b":1}');
});

test('a key that begins with the marker character survives', () => {
  const text = '{"\uE000x": 1, "\uE0007": 2, "7": 3}';
  assert.equal(stringify(parse(text), 0), '{"\uE000x":1,"\uE0007":2,"7":3}');
});

test('put changes in place and appends; drop removes', () => {
  const value = parse('{"b": 1, "3": 2, "a": 3}');
  put(value, '3', 'three');
  put(value, '1', 'new');
  drop(value, 'b');
  assert.equal(stringify(value, 0), '{"3":"three","a":3,"1":"new"}');
  assert.equal(stringify(copy(value), 0), stringify(value, 0));
});

test('broken text says where', () => {
  for (const [text, where] of [
    ['{"a": 1,}', 'line 1 column 9'],
    ['{\n  "a": tru\n}', 'line 2 column 8'],
    ['[1, 2', 'line 1 column 6'],
    ['{"a": "b\nc"}', 'line 1 column 9'],
    ['{"a": 1} x', 'line 1 column 10'],
    ['"\\x"', 'line 1 column 1'],
    ['01', 'line 1 column 2'],
  ]) {
    assert.throws(
      () => parse(text),
      (e) => e instanceof SyntaxError && e.message.includes(where),
      text,
    );
  }
});
