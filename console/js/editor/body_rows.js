// @ts-check
// The structured bodies of a request (#54) in the node form: a form's pairs (name, value), a multipart body's parts
// (name; its content as text, base64 bytes or a secret; file name; content type), and a GraphQL request's variables
// (a JSON object, checked as it is typed) and operation name. Typing writes the model in place; adding or removing a
// row redraws its list only.

import { h, fill } from '../dom.js';
import { control, button, textInput } from './controls.js';
import { fieldAt, setField } from '../lib/flow_model.js';
import { parse, stringify, isObject } from '../lib/ordered_json.js';

/** @typedef {import('./controls.js').Editor} Editor */

/** A text input of a row showing `value`; `write` takes what is typed. */
function rowInput(label, value, fieldName, write, mono = false) {
  const input = h('input', { type: 'text', value, spellcheck: 'false', class: mono ? 'code' : null });
  input.addEventListener('input', () => write(input.value));
  return control(label, input, fieldName);
}

/**
 * A list of rows with Add and Remove: `items()` is the array edited in place (made by `make()` when absent),
 * `row(item, i)` draws one, `fresh()` is a new item.
 * @param {Editor} ed
 */
function rowList(ed, { legend, noun, fieldName, items, make, row, fresh }) {
  const list = h('div', { class: 'rows' });
  const draw = (focusLast = false) => {
    fill(
      list,
      items().map((item, i) => {
        const remove = button('Remove', () => {
          items().splice(i, 1);
          ed.changed();
          draw();
          /** @type {HTMLElement} */ (part.querySelector('[data-action=add-row]')).focus();
        });
        remove.setAttribute('aria-label', `Remove ${noun.toLowerCase()} ${i + 1}`);
        return h('div', { class: 'row' }, ...row(item, i), remove);
      }),
    );
    if (focusLast) /** @type {HTMLElement} */ (list.querySelector('.row:last-child input'))?.focus();
  };
  const add = button(`Add ${noun.toLowerCase()}`, () => {
    make().push(fresh());
    ed.changed();
    draw(true);
  });
  add.dataset.action = 'add-row';
  const part = h('fieldset', { class: 'map-rows' }, h('legend', {}, legend), list, add);
  part.dataset.field = fieldName;
  draw();
  return part;
}

/** The array at `request[name]`, made empty when it is not one. */
function arrayAt(request, name) {
  if (!Array.isArray(fieldAt(request, [name]))) setField(request, [name], []);
  return fieldAt(request, [name]);
}

/**
 * A form body's pairs, `request.form` = `[[name, value], ...]`.
 * @param {Editor} ed
 */
export function formRows(ed, request) {
  const pairs = () => {
    const form = fieldAt(request, ['form']);
    return Array.isArray(form) ? form : [];
  };
  return rowList(ed, {
    legend: 'Form fields',
    noun: 'Field',
    fieldName: 'request.form',
    items: pairs,
    make: () => arrayAt(request, 'form'),
    fresh: () => ['', ''],
    row: (pair, i) => {
      if (!Array.isArray(pair)) return [h('p', { class: 'muted' }, 'Edit this pair in the JSON view.')];
      const write = (at) => (text) => {
        pair[at] = text;
        ed.changed();
      };
      return [
        rowInput('Field name', String(pair[0] ?? ''), `request.form[${i}]`, write(0), true),
        rowInput('Field value', String(pair[1] ?? ''), `request.form[${i}]`, write(1)),
      ];
    },
  });
}

/** What a part's content is: the key it is kept under, and how the form names it. */
const CONTENTS = [
  ['value', 'Text'],
  ['base64', 'Base64 bytes'],
  ['secret', 'Secret'],
];

/** The content key a part uses. */
function contentOf(part) {
  return CONTENTS.map(([key]) => key).find((key) => fieldAt(part, [key]) !== undefined) || 'value';
}

/**
 * A multipart body's parts, `request.multipart` = `[{name, value | base64 | secret, filename?, content_type?}]`.
 * @param {Editor} ed
 */
export function multipartRows(ed, request) {
  const parts = () => {
    const multipart = fieldAt(request, ['multipart']);
    return Array.isArray(multipart) ? multipart : [];
  };
  return rowList(ed, {
    legend: 'Parts',
    noun: 'Part',
    fieldName: 'request.multipart',
    items: parts,
    make: () => arrayAt(request, 'multipart'),
    fresh: () => ({ name: '', value: '' }),
    row: (part, i) => {
      if (!isObject(part)) return [h('p', { class: 'muted' }, 'Edit this part in the JSON view.')];
      const at = `request.multipart[${i}]`;
      const set = (key, optional) => (text) => {
        setField(part, [key], text === '' && optional ? undefined : text);
        ed.changed();
      };
      let content = contentOf(part);
      const kind = h(
        'select',
        {},
        CONTENTS.map(([key, label]) => h('option', { value: key, selected: key === content }, label)),
      );
      const current = fieldAt(part, [content]);
      const text = h('input', {
        type: 'text',
        value: typeof current === 'string' ? current : '',
        spellcheck: 'false',
        class: 'code',
        placeholder: content === 'secret' ? '{{secret.NAME}}' : null,
      });
      text.addEventListener('input', () => set(content, false)(text.value));
      kind.addEventListener('change', () => {
        for (const [key] of CONTENTS) setField(part, [key], undefined);
        content = kind.value;
        setField(part, [content], text.value);
        text.placeholder = content === 'secret' ? '{{secret.NAME}}' : '';
        text.dataset.field = `${at}.${content}`;
        ed.changed();
      });
      const filename = fieldAt(part, ['filename']);
      const type = fieldAt(part, ['content_type']);
      return [
        rowInput('Part name', String(fieldAt(part, ['name']) ?? ''), `${at}.name`, set('name', false), true),
        control('Content is', kind, null),
        control('Content', text, `${at}.${content}`),
        rowInput('File name', typeof filename === 'string' ? filename : '', `${at}.filename`, set('filename', true)),
        rowInput('Content type', typeof type === 'string' ? type : '', `${at}.content_type`, set('content_type', true)),
      ];
    },
  });
}

/**
 * A GraphQL request's operation name and variables (a JSON object; the model changes only when the text is one).
 * @param {Editor} ed
 */
export function graphqlExtras(ed, request) {
  const variables = fieldAt(request, ['graphql', 'variables']);
  const area = h('textarea', { rows: 3, class: 'code', spellcheck: 'false' });
  area.value = variables === undefined || variables === null ? '' : stringify(variables, 2);
  const note = h('p', { class: 'field-error', 'aria-live': 'polite' });
  area.addEventListener('input', () => {
    let problem = '';
    if (area.value.trim() === '') setField(request, ['graphql', 'variables'], undefined);
    else {
      try {
        const parsed = parse(area.value);
        if (isObject(parsed)) setField(request, ['graphql', 'variables'], parsed);
        else problem = 'The variables must be a JSON object.';
      } catch (e) {
        problem = `The variables are not JSON: ${e.message}`;
      }
    }
    note.textContent = problem;
    if (problem) area.setAttribute('aria-invalid', 'true');
    else {
      area.removeAttribute('aria-invalid');
      ed.changed();
    }
  });
  const operation = textInput(ed, 'Operation name', request, ['graphql', 'operation_name'], {
    field: 'request.graphql.operation_name',
    optional: true,
    mono: true,
  });
  const vars = control(
    'GraphQL variables',
    area,
    'request.graphql.variables',
    'A JSON object; strings may hold {{templates}}.',
  );
  vars.append(note);
  return [vars, operation];
}
