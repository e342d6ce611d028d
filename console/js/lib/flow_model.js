// @ts-check
// The flow editor's model, without the page: a definition as its author wrote it, changed in place (a changed key
// keeps its place, a new key goes last, nothing is rebuilt in a fixed order), so the JSON view round-trips exactly.
// Nodes (new, add, remove, move), name/value maps as rows, extractors and assertions, the Expected text, the JSON
// body check, the JSONPath of a picked response value, and the fields a validation problem may point at.

import { put, get, has, drop, entries, names, isObject } from './ordered_json.js';
import { jsonPath } from './json_path.js';

export { jsonPath };

/** The node kinds a person can add, with their labels. */
export const KINDS = [
  ['request', 'Request'],
  ['webhook', 'Webhook'],
  ['delay', 'Delay'],
  ['module', 'Module'],
  ['set_variables', 'Set variables'],
];

/** The HTTP methods a request node may use (the API's list). */
export const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

/**
 * The fields each extractor kind takes besides `name` and `kind` (the catalog's, for when it is not loaded).
 * @type {Record<string, string[]>}
 */
export const EXTRACTOR_FIELDS = {
  jsonPath: ['expression'],
  xmlPath: ['expression'],
  statusCode: [],
  header: ['header'],
  body: ['regex'],
  signature: [],
  duration: [],
};

/** The nodes of `definition`, an array put last when it has none. */
export function nodesOf(definition) {
  if (!Array.isArray(definition.nodes)) definition.nodes = [];
  return definition.nodes;
}

/** The node ids a definition uses. */
export function idsOf(definition) {
  return new Set(nodesOf(definition).map((n) => (isObject(n) ? n.id : undefined)));
}

/** `base` if no node has it, else `base_2`, `base_3`, ... */
export function uniqueId(base, taken) {
  if (!taken.has(base)) return base;
  for (let i = 2; ; i += 1) if (!taken.has(`${base}_${i}`)) return `${base}_${i}`;
}

/** A node id from a URL's last plain path segment (`{{base}}/users/login?x` gives `login`), else `fallback`. */
export function idFromUrl(url, fallback = 'request') {
  const path = String(url || '')
    .replace(/\{\{[^}]*\}\}/g, '')
    .replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, '')
    .split(/[?#]/)[0];
  const segments = path.split('/').map((s) => s.replace(/[^A-Za-z0-9_-]/g, '_').replace(/^_+|_+$/g, ''));
  const last = segments.filter((s) => s && !/^[0-9]+$/.test(s)).pop();
  return (last || fallback).slice(0, 64);
}

/** A new node of `kind` with an id no node of `taken` has; `request` may give a request node's method and URL. */
export function newNode(kind, taken, request = { method: 'GET', url: '' }) {
  if (kind === 'request') {
    const id = uniqueId(idFromUrl(request.url), taken);
    return { id, kind, request: { method: request.method, url: request.url } };
  }
  const id = uniqueId(kind === 'set_variables' ? 'set' : kind, taken);
  if (kind === 'webhook') return { id, kind, webhook: { timeout_ms: 30000 } };
  if (kind === 'delay') return { id, kind, delay_ms: 1000 };
  if (kind === 'module') return { id, kind, flow_id: '', version: 'latest' };
  return { id, kind, variables: {} };
}

/** A request node that uses a collection's request (`request_ref`), named after it. */
export function refNode(collectionId, request, taken) {
  const id = uniqueId(idFromUrl(request.url, idFromUrl(`/${request.name || ''}`)), taken);
  return {
    id,
    kind: 'request',
    name: request.name,
    request_ref: { collection_id: collectionId, request_id: request.id },
  };
}

/** Appends `node`; answers its index. */
export function addNode(definition, node) {
  return nodesOf(definition).push(node) - 1;
}

export function removeNode(definition, index) {
  nodesOf(definition).splice(index, 1);
}

/** Moves the node at `from` to `to` (the others keep their order). */
export function moveNode(definition, from, to) {
  const nodes = nodesOf(definition);
  if (to < 0 || to >= nodes.length || from === to) return false;
  const [node] = nodes.splice(from, 1);
  nodes.splice(to, 0, node);
  return true;
}

/**
 * Sets the field at `path` (fixed names: `['request', 'url']`) below `object`: in place when present, last
 * otherwise, making the objects on the way (last in theirs). `undefined` removes the field.
 */
export function setField(object, path, value) {
  let at = object;
  for (const name of path.slice(0, -1)) {
    if (!isObject(get(at, name))) {
      if (value === undefined) return;
      put(at, name, {});
    }
    at = get(at, name);
  }
  const last = path[path.length - 1];
  if (value === undefined) drop(at, last);
  else put(at, last, value);
}

/** The value at `path` below `object`, or undefined. */
export function fieldAt(object, path) {
  return path.reduce((at, name) => (isObject(at) ? get(at, name) : undefined), object);
}

/** A name/value map (headers, query, variables, inputs) as editable rows `[name, value]`, in order. */
export function rowsOf(map) {
  return entries(isObject(map) ? map : {});
}

/**
 * Writes `rows` into `map` in their order (the rows began as the map's entries and new rows go last, so a renamed
 * entry keeps its place). A row without a name is left out, and so is a name a row above already has: answers the
 * indexes of those rows.
 */
export function writeRows(map, rows) {
  for (const name of names(map)) drop(map, name);
  const skipped = [];
  const seen = new Set();
  rows.forEach(([name, value], i) => {
    if (!name || seen.has(name)) {
      if (name || value) skipped.push(i);
      return;
    }
    seen.add(name);
    put(map, name, value);
  });
  return skipped;
}

/** The list at `name` of `node` (extractors, assertions), put last when absent. */
export function listOf(node, name) {
  if (!Array.isArray(node[name])) node[name] = [];
  return node[name];
}

/** Sets an extractor's kind in place, dropping the fields only other kinds take and adding the new one's. */
export function setExtractorKind(extractor, kind, fields = EXTRACTOR_FIELDS) {
  const own = fields[kind] || [];
  for (const name of new Set(Object.values(fields).flat())) {
    if (!own.includes(name)) drop(extractor, name);
  }
  extractor.kind = kind;
  for (const name of own) if (name !== 'regex' && !has(extractor, name)) extractor[name] = '';
}

/** The Expected text of a value: a string as typed unless it reads as another JSON value; others as JSON. */
export function expectedText(value) {
  if (value === undefined) return '';
  if (typeof value === 'string') {
    try {
      JSON.parse(value);
      return JSON.stringify(value);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value);
}

/** The value an Expected text means: JSON when it reads as JSON (`200`, `true`, `"200"`), else the text. */
export function parseExpected(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Why a body meant as JSON does not parse (templates count as values), or null. */
export function jsonBodyProblem(text) {
  if (!text.trim()) return null;
  try {
    JSON.parse(text.replace(/\{\{[^}]*\}\}/g, '0'));
    return null;
  } catch (e) {
    return `not JSON: ${e.message}`;
  }
}

/** Whether a body reads as JSON (templates count as values). */
export function looksJson(text) {
  return /^\s*[[{]/.test(text || '') && !jsonBodyProblem(text);
}

/** A variable name for a picked value: its last key made a valid name, unique among `taken`. */
export function nameFromPath(segments, taken = new Set()) {
  const key = [...segments].reverse().find((s) => typeof s === 'string') || 'value';
  let name = key.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 120);
  if (!/^[A-Za-z_]/.test(name)) name = `v_${name}`;
  return uniqueId(name, taken);
}

/**
 * Adds to `node` a `jsonPath` extractor named `name` for the value at `segments` (or reuses one with that
 * expression); `assert` also adds an assertion that it `equals` `value`. Answers the name the value goes by.
 */
export function pickValue(node, segments, name, value, assert = false) {
  const expression = jsonPath(segments);
  const extractors = listOf(node, 'extractors');
  let found = extractors.find((e) => isObject(e) && e.kind === 'jsonPath' && e.expression === expression);
  if (!found || (!assert && found.name !== name)) {
    found = { name, kind: 'jsonPath', expression };
    extractors.push(found);
  }
  if (assert) listOf(node, 'assertions').push({ source: found.name, operator: 'equals', expected: value });
  return found.name;
}

/**
 * The fields a problem's `field` may be shown at, the most precise first: `extractors[1].name`, `extractors[1]`,
 * `extractors`.
 */
export function problemFields(field) {
  const out = [];
  let at = String(field || '');
  while (at) {
    out.push(at);
    const cut = Math.max(at.lastIndexOf('.'), at.lastIndexOf('['));
    at = cut > 0 ? at.slice(0, cut) : '';
  }
  return out;
}

/** The index of the node a problem names (`login`, or `#2` for a node without an id), or -1. */
export function problemNode(definition, nodeId, field = '') {
  const nodes = nodesOf(definition);
  const index = /^#([0-9]+)$/.exec(nodeId || '');
  if (index && !nodes.some((n) => isObject(n) && n.id === nodeId)) return Number(index[1]);
  const matching = nodes.map((n, i) => (isObject(n) && n.id === nodeId ? i : -1)).filter((i) => i >= 0);
  // "used by another node" is said of the later one.
  return (field === 'id' ? matching.pop() : matching[0]) ?? -1;
}
