// @ts-check
// Header lines of the app's forms: parsed into a map (values keep their colons), written back, refused when a line
// names no header.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseHeaders, headerLines } from '../js/lib/header_lines.js';

test('lines become a map and back', () => {
  const headers = parseHeaders('Content-Type: application/json\n\n  X-Url: https://a.example:8443/x  \n');
  assert.deepEqual(headers, { 'Content-Type': 'application/json', 'X-Url': 'https://a.example:8443/x' });
  assert.equal(headerLines(headers), 'Content-Type: application/json\nX-Url: https://a.example:8443/x');
  assert.deepEqual(parseHeaders(headerLines(headers)), headers);
  assert.equal(headerLines(undefined), '');
});

test('a line without a name is refused', () => {
  assert.throws(() => parseHeaders('no colon here'), /not a header/);
  assert.throws(() => parseHeaders(': value'), /not a header/);
});
