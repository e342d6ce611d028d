// @ts-check
// Copy as curl: every attacker-chosen byte stays inside one single-quoted shell word.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { asCurl, quote } from '../js/lib/curl.js';

/** What `sh` makes of a quoted word: the exact text back. */
function shellSays(word) {
  return execFileSync('sh', ['-c', `printf %s ${word}`], { encoding: 'utf8' });
}

test('a quote, a command substitution and a newline stay text', () => {
  for (const text of [`it's`, '$(touch /tmp/pwned)', '`id`', 'a\nb', "'; rm -rf / #", '\\', '']) {
    assert.equal(shellSays(quote(text)), text);
  }
});

const capture = {
  method: 'POST',
  path: '/orders',
  query_string: 'a=1&b=2',
  headers: /** @type {[string, string][]} */ ([
    ['Host', 'example.test'],
    ['Content-Type', 'application/json'],
    ['X-Note', "it's"],
    ['Content-Length', '9'],
  ]),
  body: '{"a":"b"}',
  body_size: 9,
  body_encoding: 'utf8',
};

test('method, URL with query, headers (not Host or Content-Length) and the body', () => {
  assert.equal(
    asCurl('http://h/c/tok', capture),
    `curl -X POST 'http://h/c/tok/orders?a=1&b=2' -H 'Content-Type: application/json' -H 'X-Note: it'\\''s' --data-binary '{"a":"b"}'`,
  );
});

test('a binary body is piped through base64 -d', () => {
  const binary = { ...capture, query_string: null, headers: [], body: 'AAE=', body_encoding: 'base64', body_size: 2 };
  assert.equal(
    asCurl('http://h/c/tok', binary),
    `printf %s 'AAE=' | base64 -d | curl -X POST 'http://h/c/tok/orders' --data-binary @-`,
  );
});

test('an empty body adds no data flag', () => {
  assert.equal(
    asCurl('http://h/c', { ...capture, headers: [], body: '', body_size: 0 }),
    `curl -X POST 'http://h/c/orders?a=1&b=2'`,
  );
});
