// @ts-check
// Validation problems where they belong: each at the control of the field it names in the card of the node it
// names (the most precise control found: `extractors[1].name`, else the row `extractors[1]`, else the card), and
// all of them in one list above the cards, each a button that goes to its control.

import { h, fill } from '../dom.js';
import { problemFields, problemNode } from '../lib/flow_model.js';

/** Removes the marks of the last validation. */
function clear(root) {
  for (const old of root.querySelectorAll('.field-error.node-problem')) old.remove();
  for (const input of root.querySelectorAll('[aria-invalid][data-marked]')) {
    input.removeAttribute('aria-invalid');
    input.removeAttribute('aria-describedby');
    input.removeAttribute('data-marked');
  }
}

const CONTROLS = 'input, select, textarea';

/** The control inside `scope` a problem of `field` is shown at, or null. */
function target(scope, field) {
  for (const name of problemFields(field)) {
    const found = scope.querySelector(`[data-field="${CSS.escape(name)}"]`);
    if (!found) continue;
    if (found.matches(CONTROLS)) return found;
    return found.querySelector(`[data-primary]`) || found.querySelector(CONTROLS) || found;
  }
  return null;
}

/** Marks `control` (or a container) with a problem's message; answers the note. */
function mark(control, fallback, text) {
  const note = h(
    'p',
    { class: 'field-error node-problem', role: 'note', id: `p-${Math.random().toString(36).slice(2)}` },
    text,
  );
  if (control && control.matches(CONTROLS)) {
    control.setAttribute('aria-invalid', 'true');
    control.setAttribute('aria-describedby', note.id);
    control.setAttribute('data-marked', '');
    (control.closest('.field') || control.parentElement).append(note);
  } else {
    (control || fallback).append(note);
  }
  return note;
}

/**
 * Shows `problems` ({node_id, field, message}) in `cards` (the list of card elements of `definition`'s nodes)
 * and in `summary`; `flowFields` holds the controls of the flow's own fields (variables, timeout).
 */
export function showProblems(definition, problems, { cards, summary, flowFields }) {
  clear(cards);
  clear(flowFields);
  const items = problems.map((p) => {
    const text = `${p.field || 'node'}: ${p.message}`;
    let control = null;
    if (p.node_id) {
      const card = cards.children[problemNode(definition, p.node_id, p.field)];
      if (card) {
        control = target(card, p.field);
        mark(control, card.querySelector('.card-problems'), text);
      }
    } else {
      control = target(flowFields, p.field);
      if (control) mark(control, flowFields, text);
    }
    const go = () => {
      if (!control) return;
      if (control.closest('details')) control.closest('details').open = true;
      control.scrollIntoView({ block: 'center' });
      if (control.matches(CONTROLS)) control.focus();
    };
    return h(
      'li',
      {},
      h(
        control ? 'button' : 'span',
        control ? { type: 'button', class: 'link', onclick: go } : {},
        p.node_id ? [h('strong', {}, `node ${p.node_id}`), ' · '] : null,
        h('code', {}, p.field || 'definition'),
        ': ',
        p.message,
      ),
    );
  });
  fill(summary, items);
  summary.hidden = !items.length;
}
