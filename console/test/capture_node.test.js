// @ts-check
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { captureToNode, tidyId } from '../js/lib/capture_node.js';

const capture = {
  method: 'POST',
  path: '/v1/orders',
  query_string: 'expand=items&dry=1',
  query: { expand: ['items'], dry: ['1'] },
  headers: /** @type {[string, string][]} */ ([
    ['Host', 'hooks.example.test'],
    ['Content-Type', 'application/json'],
    ['X-Tag', 'a'],
    ['X-Tag', 'b'],
    ['Content-Length', '12'],
    ['X-Forwarded-For', '10.0.0.1'],
  ]),
  body: '{"amount":5}',
  body_encoding: 'utf8',
  body_size: 12,
};

test('method, {{base_url}} and the path, query, headers (not transport ones), body', () => {
  const { node, notes } = captureToNode(capture, ['post_orders']);
  assert.deepEqual(notes, []);
  assert.equal(node.id, 'post_orders_2');
  assert.equal(node.kind, 'request');
  assert.deepEqual(node.request, {
    method: 'POST',
    url: '{{base_url}}/v1/orders',
    headers: { 'content-type': 'application/json', 'x-tag': 'a, b' },
    query: { expand: 'items', dry: '1' },
    body: '{"amount":5}',
  });
  assert.deepEqual(Object.keys(node), ['id', 'kind', 'name', 'request', 'extractors', 'assertions']);
});

test('a repeated query parameter keeps the raw query in the URL', () => {
  const repeated = { ...capture, query_string: 'a=1&a=2', query: { a: ['1', '2'] } };
  const { node } = captureToNode(repeated);
  assert.equal(node.request.url, '{{base_url}}/v1/orders?a=1&a=2');
  assert.deepEqual(node.request.query, {});
});

test('a binary body and template braces are pointed out', () => {
  const binary = captureToNode({ ...capture, body: 'AAE=', body_encoding: 'base64', body_size: 2 });
  assert.equal(binary.node.request.body, undefined);
  assert.match(binary.notes[0], /binary/);
  const braces = captureToNode({ ...capture, body: '{"t":"{{x}}"}' });
  assert.match(braces.notes[0], /variable/);
});

test('ids are unique and tidy', () => {
  assert.equal(tidyId('GET /', []), 'get');
  assert.equal(tidyId('***', []), 'request');
  assert.equal(tidyId('a', ['a', 'a_2']), 'a_3');
});
