// @ts-check
// Rows inside a card: name/value maps (query, headers, variables, inputs), extractors (name, kind from the
// catalog, its expression or header) and assertions (source, operator from the catalog, expected). Adding or
// removing a row redraws its list only; typing writes the model in place.

import { h, fill } from '../dom.js';
import { control, button } from './controls.js';
import {
  fieldAt,
  setField,
  rowsOf,
  writeRows,
  listOf,
  setExtractorKind,
  expectedText,
  parseExpected,
  EXTRACTOR_FIELDS,
} from '../lib/flow_model.js';
import { isObject } from '../lib/ordered_json.js';

/** @typedef {import('./controls.js').Editor} Editor */

/** Operators that take no expected value, when the catalog is not at hand. */
const WITHOUT_EXPECTED = ['exists', 'notExists'];

/**
 * A name/value map at `path` below `object` as rows; `field` is how problems name it (`request.headers`).
 * @param {Editor} ed
 */
export function mapRows(ed, { legend, noun, object, path, field, hint = null }) {
  const rows = rowsOf(fieldAt(object, path));
  const list = h('div', { class: 'rows' });
  const write = () => {
    let map = fieldAt(object, path);
    if (!isObject(map)) {
      if (!rows.some(([name]) => name)) return;
      setField(object, path, {});
      map = fieldAt(object, path);
    }
    const skipped = writeRows(map, rows);
    list.querySelectorAll('.row').forEach((row, i) => {
      row.querySelector('.row-note').textContent = skipped.includes(i)
        ? rows[i][0]
          ? 'Repeated name: only the first row with it is used.'
          : 'Give it a name.'
        : '';
    });
    ed.changed();
  };
  const draw = (focusLast = false) => {
    fill(
      list,
      rows.map((entry, i) => {
        const name = h('input', { type: 'text', value: entry[0], spellcheck: 'false', class: 'code' });
        const value = h('input', {
          type: 'text',
          value: entry[1] == null ? '' : String(entry[1]),
          spellcheck: 'false',
        });
        value.dataset.field = `${field}.${entry[0]}`;
        name.addEventListener('input', () => {
          entry[0] = name.value;
          value.dataset.field = `${field}.${name.value}`;
          write();
        });
        value.addEventListener('input', () => {
          entry[1] = value.value;
          write();
        });
        const remove = button('Remove', () => {
          rows.splice(i, 1);
          write();
          draw();
          /** @type {HTMLElement} */ (part.querySelector('[data-action=add-row]')).focus();
        });
        remove.setAttribute('aria-label', `Remove ${noun.toLowerCase()} ${entry[0]}`.trim());
        return h(
          'div',
          { class: 'row' },
          control(`${noun} name`, name, null),
          control(`${noun} value`, value, null),
          remove,
          h('p', { class: 'row-note field-error', 'aria-live': 'polite' }),
        );
      }),
    );
    if (focusLast) /** @type {HTMLElement} */ (list.querySelector('.row:last-child input'))?.focus();
  };
  const add = button(`Add ${noun.toLowerCase()}`, () => {
    rows.push(['', '']);
    draw(true);
  });
  add.dataset.action = 'add-row';
  const part = h(
    'fieldset',
    { class: 'map-rows' },
    h('legend', {}, legend),
    hint ? h('small', {}, hint) : null,
    list,
    add,
  );
  part.dataset.field = field;
  draw();
  return part;
}

/** The extractor kinds a node may use, from the catalog (the `signature` kind on webhook nodes only). */
function extractorKinds(ed, node) {
  const listed = ed.catalog.extractors.length
    ? ed.catalog.extractors.map((k) => k.kind)
    : Object.keys(EXTRACTOR_FIELDS);
  return listed.filter((kind) => kind !== 'signature' || node.kind === 'webhook');
}

/** The fields each extractor kind takes (the catalog's when loaded). */
function extractorFields(ed) {
  if (!ed.catalog.extractors.length) return EXTRACTOR_FIELDS;
  return Object.fromEntries(
    ed.catalog.extractors.map((k) => [
      k.kind,
      k.fields.map((f) => f.name).filter((name) => name !== 'name' && name !== 'kind'),
    ]),
  );
}

const FIELD_LABELS = { expression: 'Expression', header: 'Header', regex: 'Regex' };

/**
 * A node's extractors: Name, Kind and what the kind takes, a row each.
 * @param {Editor} ed
 */
export function extractorRows(ed, node) {
  const list = h('div', { class: 'rows' });
  const draw = (focus) => {
    const extractors = Array.isArray(node.extractors) ? node.extractors : [];
    fill(
      list,
      extractors.map((extractor, i) => {
        const at = `extractors[${i}]`;
        if (!isObject(extractor))
          return h('p', { class: 'muted', 'data-field': at }, 'Edit this one in the JSON view.');
        const kind = h(
          'select',
          {},
          extractorKinds(ed, node).map((k) => h('option', { value: k, selected: k === extractor.kind }, k)),
        );
        kind.addEventListener('change', () => {
          setExtractorKind(extractor, kind.value, extractorFields(ed));
          ed.changed();
          draw(`${at}.kind`);
        });
        const own = (extractorFields(ed)[extractor.kind] || []).map((name) => {
          const input = h('input', {
            type: 'text',
            value: extractor[name] == null ? '' : String(extractor[name]),
            spellcheck: 'false',
            class: 'code',
            'data-primary': '',
          });
          input.addEventListener('input', () => {
            setField(extractor, [name], input.value === '' && name === 'regex' ? undefined : input.value);
            ed.changed();
          });
          return control(FIELD_LABELS[name] || name, input, `${at}.${name}`);
        });
        const name = h('input', { type: 'text', value: extractor.name ?? '', spellcheck: 'false', class: 'code' });
        name.addEventListener('input', () => {
          extractor.name = name.value;
          ed.changed();
        });
        const row = h(
          'div',
          { class: 'row extractor' },
          control('Name', name, `${at}.name`),
          control('Kind', kind, `${at}.kind`),
          own,
          button('Remove', () => {
            extractors.splice(i, 1);
            ed.changed();
            draw(null);
            add.focus();
          }),
        );
        row.dataset.field = at;
        return row;
      }),
    );
    if (focus) /** @type {HTMLElement} */ (list.querySelector(`[data-field="${focus}"]`))?.focus();
  };
  const add = button('Add extractor', () => {
    const extractors = listOf(node, 'extractors');
    const taken = new Set(extractors.map((e) => e && e.name));
    let name = 'value';
    for (let n = 2; taken.has(name); n += 1) name = `value_${n}`;
    extractors.push({ name, kind: 'jsonPath', expression: '$' });
    ed.changed();
    draw(`extractors[${extractors.length - 1}].name`);
  });
  draw(null);
  const part = h('fieldset', { class: 'extractors' }, h('legend', {}, 'Extractors'), list, add);
  part.dataset.field = 'extractors';
  return part;
}

/** Whether `operator` takes an expected value (the catalog says). */
function takesExpected(ed, operator) {
  const known = ed.catalog.operators.find((o) => o.name === operator);
  return known ? known.takes_expected : !WITHOUT_EXPECTED.includes(operator);
}

/**
 * A node's assertions: Source, Operator and Expected, a row each.
 * @param {Editor} ed
 */
export function assertionRows(ed, node) {
  const list = h('div', { class: 'rows' });
  const operators = () =>
    ed.catalog.operators.length
      ? ed.catalog.operators.map((o) => o.name)
      : ['equals', 'notEquals', 'contains', 'exists', 'notExists'];
  const draw = (focus) => {
    const assertions = Array.isArray(node.assertions) ? node.assertions : [];
    fill(
      list,
      assertions.map((assertion, i) => {
        const at = `assertions[${i}]`;
        if (!isObject(assertion))
          return h('p', { class: 'muted', 'data-field': at }, 'Edit this one in the JSON view.');
        const source = h('input', { type: 'text', value: assertion.source ?? '', spellcheck: 'false', class: 'code' });
        source.addEventListener('input', () => {
          assertion.source = source.value;
          ed.changed();
        });
        const operator = h(
          'select',
          {},
          operators().map((name) => h('option', { value: name, selected: name === assertion.operator }, name)),
        );
        const expected = h('input', { type: 'text', value: expectedText(assertion.expected), spellcheck: 'false' });
        const expectedField = control('Expected', expected, `${at}.expected`, 'JSON (200, true, "text") or text');
        const showExpected = () => {
          expectedField.hidden = !takesExpected(ed, assertion.operator);
        };
        operator.addEventListener('change', () => {
          assertion.operator = operator.value;
          if (!takesExpected(ed, operator.value)) delete assertion.expected;
          showExpected();
          ed.changed();
        });
        expected.addEventListener('input', () => {
          assertion.expected = parseExpected(expected.value);
          ed.changed();
        });
        showExpected();
        const row = h(
          'div',
          { class: 'row assertion' },
          control('Source', source, `${at}.source`),
          control('Operator', operator, `${at}.operator`),
          expectedField,
          button('Remove', () => {
            assertions.splice(i, 1);
            ed.changed();
            draw(null);
            add.focus();
          }),
        );
        row.dataset.field = at;
        return row;
      }),
    );
    if (focus) /** @type {HTMLElement} */ (list.querySelector(`[data-field="${focus}"]`))?.focus();
  };
  const add = button('Add assertion', () => {
    const assertions = listOf(node, 'assertions');
    const named = (Array.isArray(node.extractors) ? node.extractors : []).filter((e) => isObject(e) && e.name);
    assertions.push({ source: named.length ? named[named.length - 1].name : '', operator: 'equals' });
    ed.changed();
    draw(`assertions[${assertions.length - 1}].source`);
  });
  draw(null);
  const part = h('fieldset', { class: 'assertions-edit' }, h('legend', {}, 'Assertions'), list, add);
  part.dataset.field = 'assertions';
  return part;
}
