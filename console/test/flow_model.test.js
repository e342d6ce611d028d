// @ts-check
// The flow editor's model: nodes added, removed and moved; fields and rows changed in place (key order kept); the
// JSON round trip byte for byte; the JSONPath of a picked value; Expected texts; where a problem is shown.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, stringify } from '../js/lib/ordered_json.js';
import {
  newNode,
  refNode,
  addNode,
  removeNode,
  moveNode,
  idsOf,
  idFromUrl,
  setField,
  fieldAt,
  rowsOf,
  writeRows,
  listOf,
  setExtractorKind,
  expectedText,
  parseExpected,
  jsonBodyProblem,
  looksJson,
  jsonPath,
  nameFromPath,
  pickValue,
  problemFields,
  problemNode,
} from '../js/lib/flow_model.js';

/** A definition whose keys are in no usual order, some of them integer-like. */
const UNUSUAL = `{
  "nodes": [
    {
      "request": {
        "url": "{{base_url}}/login",
        "headers": {
          "x-b": "2",
          "X-A": "1",
          "9": "nine"
        },
        "body": "{\\"user\\": \\"{{user}}\\"}",
        "method": "POST"
      },
      "assertions": [
        {
          "operator": "equals",
          "expected": 200,
          "source": "status"
        }
      ],
      "kind": "request",
      "id": "login",
      "extractors": [
        {
          "kind": "statusCode",
          "name": "status"
        }
      ]
    },
    {
      "delay_ms": 5,
      "id": "pause",
      "kind": "delay"
    }
  ],
  "variables": {
    "user": "ada",
    "base_url": "http://127.0.0.1:1"
  },
  "layout": {
    "pause": {
      "y": 1,
      "x": 2
    },
    "2": "second",
    "1": "first"
  }
}`;

test('the JSON round trip is byte for byte, whatever the key order', () => {
  assert.equal(stringify(parse(UNUSUAL)), UNUSUAL);
});

test('changing fields keeps every key where it was and puts new ones last', () => {
  const definition = parse(UNUSUAL);
  const login = definition.nodes[0];
  setField(login, ['request', 'method'], 'PUT');
  setField(login, ['name'], 'Log in');
  setField(login, ['request', 'query', 'page'], '1');
  login.assertions[0].expected = 201;
  const text = stringify(definition);
  const expected = UNUSUAL.replace(
    '"method": "POST"',
    '"method": "PUT",\n        "query": {\n          "page": "1"\n        }',
  )
    .replace('"expected": 200', '"expected": 201')
    .replace(
      '"kind": "statusCode",\n          "name": "status"\n        }\n      ]\n',
      '"kind": "statusCode",\n          "name": "status"\n        }\n      ],\n      "name": "Log in"\n',
    );
  assert.equal(text, expected);
  assert.equal(fieldAt(login, ['request', 'query', 'page']), '1');
  setField(login, ['name'], undefined);
  setField(login, ['request', 'query', 'page'], undefined);
  assert.equal(fieldAt(login, ['name']), undefined);
  assert.deepEqual(login.request.query, {});
  setField(login, ['retry', 'count'], undefined);
  assert.equal('retry' in login, false, 'removing below a missing object makes nothing');
});

test('rows of a map: renamed in place, added last, repeats and empty names left out', () => {
  const definition = parse(UNUSUAL);
  const headers = definition.nodes[0].request.headers;
  const rows = rowsOf(headers);
  assert.deepEqual(rows, [
    ['x-b', '2'],
    ['X-A', '1'],
    ['9', 'nine'],
  ]);
  rows[1] = ['X-Renamed', '1'];
  rows.push(['x-new', 'v'], ['x-b', 'again'], ['', 'no name'], ['', '']);
  assert.deepEqual(writeRows(headers, rows), [4, 5]);
  assert.equal(
    stringify(headers, 0),
    '{"x-b":"2","X-Renamed":"1","9":"nine","x-new":"v"}',
    'the same object, in the rows order',
  );
  assert.equal(definition.nodes[0].request.headers, headers);
});

test('nodes are added with free ids, removed and moved', () => {
  const definition = parse(UNUSUAL);
  const taken = idsOf(definition);
  const request = newNode('request', taken, { method: 'POST', url: '{{base_url}}/login?x=1' });
  assert.equal(request.id, 'login_2', 'login is taken');
  assert.deepEqual(Object.keys(request), ['id', 'kind', 'request']);
  assert.equal(addNode(definition, request), 2);
  assert.equal(newNode('delay', idsOf(definition)).delay_ms, 1000);
  assert.equal(newNode('set_variables', idsOf(definition)).id, 'set');
  assert.equal(newNode('webhook', idsOf(definition)).kind, 'webhook');
  assert.equal(moveNode(definition, 2, 0), true);
  assert.deepEqual(
    definition.nodes.map((n) => n.id),
    ['login_2', 'login', 'pause'],
  );
  assert.equal(moveNode(definition, 0, -1), false, 'the first cannot go up');
  assert.equal(moveNode(definition, 2, 3), false, 'the last cannot go down');
  removeNode(definition, 0);
  assert.equal(stringify(definition), UNUSUAL, 'added, moved and removed: the text is as it was');
  const empty = {};
  addNode(empty, newNode('module', idsOf(empty)));
  assert.equal(stringify(empty, 0), '{"nodes":[{"id":"module","kind":"module","flow_id":"","version":"latest"}]}');
});

test('ids from URLs', () => {
  assert.equal(idFromUrl('{{base_url}}/users/login?x=1'), 'login');
  assert.equal(idFromUrl('https://api.example.com/orders/42'), 'orders');
  assert.equal(idFromUrl('https://api.example.com/'), 'request');
  assert.equal(idFromUrl('/v1/a.b c'), 'a_b_c');
  assert.equal(idFromUrl(''), 'request');
});

test('a collection request becomes a request_ref node', () => {
  const node = refNode('c-1', { id: 'r-1', name: 'List all pets', url: '{{base_url}}/pets' }, new Set(['pets']));
  assert.equal(
    stringify(node, 0),
    '{"id":"pets_2","kind":"request","name":"List all pets","request_ref":{"collection_id":"c-1","request_id":"r-1"}}',
  );
  assert.equal(refNode('c', { id: 'r', name: 'Get one', url: '{{u}}/{{id}}' }, new Set()).id, 'Get_one');
});

test("an extractor's kind changes in place, with its fields", () => {
  const extractor = parse('{"name": "t", "kind": "jsonPath", "expression": "$.a"}');
  setExtractorKind(extractor, 'header');
  assert.equal(stringify(extractor, 0), '{"name":"t","kind":"header","header":""}');
  setExtractorKind(extractor, 'body');
  assert.equal(stringify(extractor, 0), '{"name":"t","kind":"body"}');
  setExtractorKind(extractor, 'statusCode');
  assert.equal(stringify(extractor, 0), '{"name":"t","kind":"statusCode"}');
});

test('Expected: what a person types, and back', () => {
  /** @type {[string, any][]} */
  const samples = [
    ['200', 200],
    ['tok-ada', 'tok-ada'],
    ['"200"', '200'],
    ['true', true],
    ['null', null],
    ['[1,2]', [1, 2]],
    ['{"a":1}', { a: 1 }],
    ['', ''],
  ];
  for (const [text, value] of samples) {
    assert.deepEqual(parseExpected(text), value, text);
    assert.deepEqual(parseExpected(expectedText(value)), value, `${text} round trip`);
  }
  assert.equal(expectedText('tok-ada'), 'tok-ada');
  assert.equal(expectedText('200'), '"200"');
  assert.equal(expectedText(undefined), '');
});

test('a JSON body is checked with its templates as values', () => {
  assert.equal(jsonBodyProblem('{"user": "{{user}}", "n": {{count}}}'), null);
  assert.equal(jsonBodyProblem(''), null);
  assert.match(jsonBodyProblem('{"user": }') || '', /^not JSON/);
  assert.equal(looksJson('{"a": 1}'), true);
  assert.equal(looksJson('a=1'), false);
});

test('the JSONPath of a picked value', () => {
  assert.equal(jsonPath([]), '$');
  assert.equal(jsonPath(['data', 0, 'id']), '$.data[0].id');
  assert.equal(jsonPath(['a b', 'x-y', '_ok', 'ünï', '0']), "$['a b']['x-y']._ok['ünï']['0']");
  assert.equal(
    jsonPath(["it's", 'back\\slash', 'line\nbreak', 'tab\t', '\u0001']),
    "$['it\\'s']['back\\\\slash']['line\\nbreak']['tab\\t']['\\u0001']",
  );
  assert.equal(jsonPath([3, 'say "hi"']), `$[3]['say "hi"']`);
});

test('a name for a picked value', () => {
  assert.equal(nameFromPath(['data', 0, 'id']), 'id');
  assert.equal(nameFromPath(['data', 0, 'id'], new Set(['id'])), 'id_2');
  assert.equal(nameFromPath([0, 1]), 'value');
  assert.equal(nameFromPath(['9 lives']), 'v_9_lives');
});

test('picking a value adds an extractor, and an assertion on it', () => {
  const node = parse('{"id": "login", "kind": "request", "request": {"method": "GET", "url": "x"}}');
  assert.equal(pickValue(node, ['token'], 'token', 'tok-ada'), 'token');
  assert.equal(pickValue(node, ['user', 'id'], 'uid', 7, true), 'uid');
  assert.equal(pickValue(node, ['token'], 'other', 'tok-ada', true), 'token', 'the extractor of that path is reused');
  assert.equal(
    stringify(node, 0),
    '{"id":"login","kind":"request","request":{"method":"GET","url":"x"},"extractors":[' +
      '{"name":"token","kind":"jsonPath","expression":"$.token"},' +
      '{"name":"uid","kind":"jsonPath","expression":"$.user.id"}],"assertions":[' +
      '{"source":"uid","operator":"equals","expected":7},' +
      '{"source":"token","operator":"equals","expected":"tok-ada"}]}',
  );
  assert.equal(listOf(node, 'extractors').length, 2);
});

test('where a problem shows', () => {
  assert.deepEqual(problemFields('extractors[1].name'), ['extractors[1].name', 'extractors[1]', 'extractors']);
  assert.deepEqual(problemFields('request.headers.x-token'), ['request.headers.x-token', 'request.headers', 'request']);
  assert.deepEqual(problemFields(''), []);
  const definition = parse('{"nodes": [{"id": "a"}, {"id": "b"}, {"id": "a"}, {"kind": "delay"}]}');
  assert.equal(problemNode(definition, 'b'), 1);
  assert.equal(problemNode(definition, 'a', 'request.url'), 0);
  assert.equal(problemNode(definition, 'a', 'id'), 2, 'the later of two nodes with one id');
  assert.equal(problemNode(definition, '#3'), 3);
  assert.equal(problemNode(definition, 'gone'), -1);
});
