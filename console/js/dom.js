// @ts-check
// DOM helpers. Everything a capture, a flow or a person carries is attacker-controlled: it becomes text nodes and
// attribute values, never markup (no innerHTML anywhere in the app).

/** An element: h('button', {class: 'primary', onclick: f}, 'Save'). Children may be nodes, strings, arrays. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
    else if (name === 'class') el.className = value;
    else if (name === 'value') el.value = value;
    else if (name === 'checked') el.checked = Boolean(value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  add(el, children);
  return el;
}

function add(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

/** Replaces an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  add(el, children);
  return el;
}

/** A labelled form control: the label names the input for screen readers and clicks. */
let fieldCount = 0;
export function field(label, input, hint) {
  const id = input.id || `f${++fieldCount}`;
  input.id = id;
  return h('div', { class: 'field' }, h('label', { for: id }, label), input, hint ? h('small', {}, hint) : null);
}

/** A date as the person's locale shows it, with the exact UTC time as a tooltip. */
export function when(text) {
  if (!text) return h('span', { class: 'muted' }, '—');
  const date = new Date(text);
  return h('time', { datetime: text, title: text }, date.toLocaleString());
}

export function ago(text) {
  if (!text) return 'never';
  const s = Math.max(0, (Date.now() - new Date(text).getTime()) / 1000);
  if (s < 60) return `${Math.floor(s)} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

export function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** A button that copies `text()` to the clipboard and says so. */
export function copyButton(label, text) {
  const button = h('button', { type: 'button', class: 'small' }, label);
  button.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(typeof text === 'function' ? text() : text);
      button.textContent = 'Copied';
    } catch {
      button.textContent = 'Copy failed';
    }
    setTimeout(() => {
      button.textContent = label;
    }, 1500);
  });
  return button;
}

/** A status badge (succeeded, failed, online, ...). */
export function badge(text) {
  return h('span', { class: `badge badge-${String(text).replace(/[^a-z_]/g, '')}` }, text);
}

/** A message area for errors and notices; `show(error)` fills it. */
export function notice() {
  const el = h('p', { class: 'notice', role: 'alert', hidden: true });
  el.show = (message, kind = 'error') => {
    el.hidden = !message;
    el.className = `notice notice-${kind}`;
    el.textContent = message instanceof Error ? message.message : message || '';
  };
  return el;
}

/**
 * A table from rows: columns are [heading, row => cell]. With `stacked`, a narrow screen shows each row as a card
 * whose cells are labelled with their headings (app.css), so names and URLs keep the card's whole width.
 * @param {Array<[string, (row: any) => any]>} columns
 * @param {any[]} rows
 * @param {string} [empty]
 * @param {{stacked?: boolean}} [options]
 */
export function table(columns, rows, empty = 'Nothing here yet.', options = {}) {
  if (!rows.length) return h('p', { class: 'empty' }, empty);
  // In a scrolling box of its own: columns keep readable widths on a phone instead of breaking words. The box
  // takes the focus only while it scrolls, so a keyboard can scroll it too.
  const box = h(
    'div',
    { class: 'table-scroll' },
    h(
      'table',
      options.stacked ? { class: 'stacked' } : {},
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          columns.map(([heading]) => h('th', { scope: 'col' }, heading)),
        ),
      ),
      h(
        'tbody',
        {},
        rows.map((row) =>
          h(
            'tr',
            {},
            columns.map(([heading, cell]) => h('td', heading ? { 'data-label': heading } : {}, cell(row))),
          ),
        ),
      ),
    ),
  );
  new ResizeObserver(() => {
    if (box.scrollWidth > box.clientWidth) box.tabIndex = 0;
    else box.removeAttribute('tabindex');
  }).observe(box);
  return box;
}

/** A modal dialog with a title and content; resolves when closed. */
export function dialog(title, content) {
  const el = h(
    'dialog',
    { 'aria-label': title },
    h('h2', {}, title),
    content,
    h('form', { method: 'dialog', class: 'actions' }, h('button', { type: 'submit' }, 'Close')),
  );
  document.body.append(el);
  el.addEventListener('close', () => el.remove());
  el.showModal();
  return el;
}
