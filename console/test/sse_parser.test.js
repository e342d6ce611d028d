// @ts-check
// The SSE parser: events split anywhere across chunks, CRLF lines, comments, ids, multi-line data.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SseParser } from '../js/lib/sse_parser.js';

test('one event in one chunk, with its id', () => {
  const events = new SseParser().push('id: 7\ndata: {"kind":"request"}\n\n');
  assert.deepEqual(events, [{ data: { kind: 'request' }, id: '7' }]);
});

test('an event split at every byte arrives once, whole', () => {
  const text = 'id: 1\r\ndata: {"n":1}\r\n\r\n: keep-alive\n\nid: 2\ndata: {"n":\ndata: 2}\n\n';
  const parser = new SseParser();
  const events = [...text].flatMap((char) => parser.push(char));
  assert.deepEqual(events, [
    { data: { n: 1 }, id: '1' },
    { data: { n: 2 }, id: '2' },
  ]);
});

test('comments and events without data are not delivered; an unfinished event waits', () => {
  const parser = new SseParser();
  assert.deepEqual(parser.push(': ping\n\nid: 3\n\nevent: x\ndata: [1]'), []);
  assert.deepEqual(parser.push('\n\n'), [{ data: [1], id: null }]);
});

test('data that is not JSON is an error, not a silent drop', () => {
  assert.throws(() => new SseParser().push('data: {nope\n\n'), SyntaxError);
});

test('a chunk of many events is parsed in one pass', () => {
  const parser = new SseParser();
  const chunk = Array.from({ length: 5000 }, (_, i) => `id: ${i}\r\ndata: {"i":${i}}\r\n\r\n`).join('');
  const events = parser.push(chunk);
  assert.equal(events.length, 5000);
  assert.deepEqual(events[4999], { data: { i: 4999 }, id: '4999' });
  assert.equal(parser.buffer, '');
});
