// @ts-check
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { diffHeaders, diffJson, diffLines, LIMITS } from '../js/lib/diff.js';

test('headers by name, case-insensitive, repeats joined', () => {
  const rows = diffHeaders(
    [
      ['Content-Type', 'application/json'],
      ['X-A', '1'],
      ['x-a', '2'],
    ],
    [
      ['content-type', 'application/json'],
      ['X-B', 'z'],
    ],
  );
  assert.deepEqual(rows, [
    { name: 'content-type', left: 'application/json', right: 'application/json', same: true },
    { name: 'x-a', left: '1, 2', right: null, same: false },
    { name: 'x-b', left: null, right: 'z', same: false },
  ]);
});

test('JSON values by path: changed, added, removed, type changes, nested arrays', () => {
  const { changes, truncated } = diffJson(
    { id: 1, data: { items: [1, 2, 3], 'x-y': 'a' }, gone: true, t: 1 },
    { id: 1, data: { items: [1, 5], 'x-y': 'b' }, extra: null, t: '1' },
  );
  assert.equal(truncated, false);
  assert.deepEqual(changes, [
    { path: '$.data.items[1]', kind: 'changed', left: 2, right: 5 },
    { path: '$.data.items[2]', kind: 'removed', left: 3 },
    { path: "$.data['x-y']", kind: 'changed', left: 'a', right: 'b' },
    { path: '$.gone', kind: 'removed', left: true },
    { path: '$.t', kind: 'changed', left: 1, right: '1' },
    { path: '$.extra', kind: 'added', right: null },
  ]);
  assert.deepEqual(diffJson({ a: [1] }, { a: [1] }).changes, []);
});

test('hostile shapes stop at the limits instead of freezing the page', () => {
  let deep = {};
  for (let i = 0; i < 1000; i += 1) deep = { d: deep };
  assert.equal(diffJson(deep, { d: 1 }).truncated, false);
  assert.equal(diffJson(deep, structuredClone(deep)).truncated, true);
  const wide = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, i]));
  const { changes, truncated } = diffJson(wide, {});
  assert.equal(truncated, true);
  assert.equal(changes.length, LIMITS.changes);
});

test('lines: the common ones kept, the rest removed or added; too long answers null', () => {
  assert.deepEqual(diffLines('a\nb\nc', 'a\nc\nd'), [
    { kind: 'same', line: 'a' },
    { kind: 'removed', line: 'b' },
    { kind: 'same', line: 'c' },
    { kind: 'added', line: 'd' },
  ]);
  assert.equal(diffLines('x\n'.repeat(LIMITS.lines + 1), 'x'), null);
});
