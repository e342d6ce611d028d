// @ts-check
// The editor's form controls: each one labelled (the label names it for screen readers and the tests), tagged with
// the definition field it edits (`data-field`, where a validation problem about that field is shown), and bound to
// the model: typing writes the value in place and tells the editor.

import { h, field } from '../dom.js';
import { fieldAt, setField } from '../lib/flow_model.js';

/**
 * The editor a card's controls talk to (editor.js makes it).
 * @typedef {object} Editor
 * @property {any} flow
 * @property {any} definition
 * @property {{operators: any[], extractors: any[]}} catalog
 * @property {any} lookups
 * @property {(origin?: string) => void} changed
 * @property {(focus?: () => (Element | null | undefined)) => void} rebuild
 * @property {WeakMap<object, any>} tries
 * @property {Map<string, any>} tried
 * @property {() => string} environment
 * @property {(text: string, undo?: () => void) => void} announce
 */

/** A labelled control editing the definition field `fieldName`. */
export function control(label, input, fieldName, hint) {
  if (fieldName) input.dataset.field = fieldName;
  return field(label, input, hint);
}

/**
 * A text input bound to `path` below `object`; an empty text removes an optional field, a required one keeps ''.
 * @param {Editor} ed
 */
export function textInput(ed, label, object, path, options = {}) {
  const value = fieldAt(object, path);
  const input = h('input', {
    type: 'text',
    value: value === undefined || value === null ? '' : String(value),
    placeholder: options.placeholder,
    spellcheck: 'false',
    class: options.mono ? 'code' : null,
  });
  input.addEventListener('input', () => {
    setField(object, path, input.value === '' && options.optional ? undefined : input.value);
    ed.changed();
  });
  return control(label, input, options.field || path.join('.'), options.hint);
}

/**
 * A whole-number input bound to `path`; empty removes an optional field and writes null for a required one (the
 * validation then says what is missing).
 * @param {Editor} ed
 */
export function numberInput(ed, label, object, path, options = {}) {
  const value = fieldAt(object, path);
  const input = h('input', {
    type: 'number',
    min: 0,
    step: 1,
    inputmode: 'numeric',
    value: typeof value === 'number' ? String(value) : '',
    placeholder: options.placeholder,
  });
  input.addEventListener('input', () => {
    const empty = input.value.trim() === '';
    setField(object, path, empty ? (options.optional ? undefined : null) : Number(input.value));
    ed.changed();
  });
  return control(label, input, options.field || path.join('.'), options.hint);
}

/**
 * A select bound to `path`; `choices` are `[value, text]`; the value '' removes an optional field.
 * @param {Editor} ed
 */
export function selectInput(ed, label, object, path, choices, options = {}) {
  const value = fieldAt(object, path);
  const known = choices.some(([v]) => v === value);
  const select = h(
    'select',
    {},
    choices.map(([v, text]) => h('option', { value: v, selected: v === value }, text)),
    !known && value !== undefined && value !== null ? h('option', { value, selected: true }, String(value)) : null,
  );
  select.addEventListener('change', () => {
    setField(object, path, select.value === '' && options.optional ? undefined : select.value);
    ed.changed();
    if (options.onChange) options.onChange(select.value);
  });
  return control(label, select, options.field || path.join('.'), options.hint);
}

/**
 * A checkbox bound to a boolean field that defaults to `fallback` when absent; it writes the field only when it
 * differs from that default or is already there.
 * @param {Editor} ed
 */
export function checkInput(ed, label, object, path, fallback) {
  const value = fieldAt(object, path);
  const input = h('input', { type: 'checkbox', checked: value === undefined ? fallback : Boolean(value) });
  input.dataset.field = path.join('.');
  input.addEventListener('change', () => {
    const present = fieldAt(object, path) !== undefined;
    setField(object, path, !present && input.checked === fallback ? undefined : input.checked);
    ed.changed();
  });
  const id = `c${Math.random().toString(36).slice(2)}`;
  input.id = id;
  return h('div', { class: 'field check' }, input, h('label', { for: id }, label));
}

/** A small button; `label` is its text, the name a person (and a test) finds it by. */
export function button(label, onclick, options = {}) {
  return h(
    'button',
    {
      type: 'button',
      class: options.class || 'small',
      onclick,
      'aria-label': options.ariaLabel,
      'data-action': options.action,
      disabled: options.disabled,
    },
    label,
  );
}
