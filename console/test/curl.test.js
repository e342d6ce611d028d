// @ts-check
// Copy as curl: every attacker-chosen byte stays inside one single-quoted shell word.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
    `curl -X POST 'http://h/c/tok/orders?a=1&b=2' -H 'Content-Type: application/json' -H 'X-Note: it'\\''s' --data-raw '{"a":"b"}'`,
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

/**
 * Runs a copied command line with the real curl against a loopback server and answers what arrived.
 * @param {(url: string) => string} lineFor the command line, given the server's URL
 * @returns {Promise<{ method: string, url: string, body: Buffer }>}
 */
async function sentByCurl(lineFor) {
  /** @type {{ method: string, url: string, body: Buffer }[]} */
  const seen = [];
  const server = createServer((req, res) => {
    /** @type {Buffer[]} */
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', body: Buffer.concat(chunks) });
      res.end('ok');
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = /** @type {import('node:net').AddressInfo} */ (server.address());
  try {
    await new Promise((resolve, reject) =>
      execFile('sh', ['-c', lineFor(`http://127.0.0.1:${address.port}/c/tok`)], { timeout: 10_000 }, (error) =>
        error ? reject(error) : resolve(undefined),
      ),
    );
  } finally {
    server.close();
  }
  assert.equal(seen.length, 1, 'curl sent one request');
  return seen[0];
}

test('a body starting with @ is sent as it is: curl never reads the file it names', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hookflow-curl-'));
  const secretFile = join(dir, 'secret');
  writeFileSync(secretFile, 'the file curl must not read');
  for (const body of [`@${secretFile}`, `@${secretFile}\n`, '@-', '@']) {
    const attack = { ...capture, headers: [], body, body_size: body.length };
    const arrived = await sentByCurl((url) => asCurl(url, attack));
    assert.equal(arrived.body.toString('utf8'), body);
    assert.equal(arrived.url, '/c/tok/orders?a=1&b=2');
  }
});

test('a binary body arrives byte for byte', async () => {
  const bytes = Buffer.from([0, 1, 0x40, 0xff, 10, 13, 0x27]);
  const binary = {
    ...capture,
    headers: [],
    body: bytes.toString('base64'),
    body_encoding: 'base64',
    body_size: bytes.length,
  };
  const arrived = await sentByCurl((url) => asCurl(url, binary));
  assert.deepEqual(arrived.body, bytes);
});
