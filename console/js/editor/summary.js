// @ts-check
// A node in one glance, above its card's form: the request line, what it extracts and asserts (as written), what a
// webhook node waits for, a delay, a module, the variables set.

import { h } from '../dom.js';
import { waitsFor } from '../pages/webhook_node.js';
import { entries, names, isObject } from '../lib/ordered_json.js';

/** A node's extractors and assertions, as written. */
function checks(node) {
  const extractors = (Array.isArray(node.extractors) ? node.extractors : []).filter(isObject);
  const assertions = (Array.isArray(node.assertions) ? node.assertions : []).filter(isObject);
  return [
    extractors.length
      ? h(
          'p',
          { class: 'muted' },
          'Extracts: ',
          extractors
            .map(
              (e) => `${e.name} ← ${e.kind}${e.expression ? ` ${e.expression}` : ''}${e.header ? ` ${e.header}` : ''}`,
            )
            .join(', '),
        )
      : null,
    assertions.length
      ? h(
          'ul',
          { class: 'assertions' },
          assertions.map((a) =>
            h('li', {}, `${a.source} ${a.operator}${a.expected !== undefined ? ` ${JSON.stringify(a.expected)}` : ''}`),
          ),
        )
      : null,
  ];
}

/** The request a `request_ref` names, with the node's overrides over it, and where it comes from. */
function referenced(node, lookups) {
  const ref = node.request_ref;
  const collection = lookups.collection(ref.collection_id);
  const request = collection && collection.requests.find((r) => r.id === ref.request_id);
  const overrides = isObject(ref.overrides) ? ref.overrides : {};
  const method = overrides.method || (request ? request.method : '');
  const url = overrides.url || (request ? request.url : '');
  const origin = request ? `${collection.name} · ${request.name}` : 'a collection request';
  return [
    h('strong', {}, method || 'request'),
    ' ',
    h('code', {}, url),
    h('span', { class: 'muted' }, ` from ${origin}`),
  ];
}

/** The summary of one node; `lookups` gives endpoint names and collections already read. */
export function describe(node, lookups) {
  if (!isObject(node)) return h('p', { class: 'muted' }, 'Not a node object: edit it in the JSON view.');
  if (node.kind === 'request') {
    const request = isObject(node.request) ? node.request : {};
    const line = isObject(node.request_ref)
      ? referenced(node, lookups)
      : [h('strong', {}, request.method || 'request'), ' ', h('code', {}, request.url || '')];
    return [h('p', { class: 'request-line' }, line), checks(node)];
  }
  if (node.kind === 'webhook') return [waitsFor(node, lookups.webhookNames), checks(node)];
  if (node.kind === 'delay') return h('p', {}, `Wait ${node.delay_ms} ms`);
  if (node.kind === 'module') {
    const flow = lookups.flows.find((f) => f.id === node.flow_id);
    const inputs = names(node.inputs);
    return h(
      'p',
      {},
      `Runs ${flow ? flow.name : `flow ${node.flow_id || '(not chosen)'}`} (${node.version || 'latest'})`,
      inputs.length ? ` with ${inputs.join(', ')}` : '',
    );
  }
  if (node.kind === 'set_variables') {
    const set = entries(node.variables);
    return h('p', {}, set.length ? `Sets ${set.map(([name]) => name).join(', ')}` : 'Sets nothing yet');
  }
  return h('p', { class: 'muted' }, `A ${String(node.kind)} node: edit it in the JSON view.`);
}
