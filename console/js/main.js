// @ts-check
// The app's frame: restores the session from the refresh cookie, routes `#/...` addresses to pages, and draws the
// navigation with the organization switcher and sign-out. An invitation's link (`#/invite/<token>`) is held while
// the person signs in, then offered for acceptance (before any organization: a new person has none). Mailed links
// (password reset, sign-up confirmation) and "Forgot password?" open their pages whoever is signed in. Each page is `render(main, params)` and may answer a
// cleanup function (streams to stop) that runs when the person leaves it.

import { session, refresh, loadSession, chooseOrganization, signOut, mayHaveSession } from './api.js';
import { h, fill } from './dom.js';
import * as signin from './pages/signin.js';
import * as invite from './pages/invite.js';
import * as recovery from './pages/recovery.js';
import { finishExternalSignIn } from './oidc.js';

// Each page's module is loaded when first opened: the first page carries only the frame and the sign-in.
/** @typedef {(main: HTMLElement, params: string[]) => Promise<any>} Render */
/** @type {[RegExp, () => Promise<Render>][]} */
const ROUTES = [
  [/^\/webhooks$/, async () => (await import('./pages/webhooks.js')).render],
  [/^\/webhooks\/([0-9a-f-]{36})$/, async () => (await import('./pages/inspector.js')).render],
  [
    /^\/webhooks\/([0-9a-f-]{36})\/requests\/([0-9a-f-]{36})$/,
    async () => (await import('./pages/capture_detail.js')).renderPage,
  ],
  [/^\/flows$/, async () => (await import('./pages/flows.js')).render],
  [/^\/flows\/([0-9a-f-]{36})$/, async () => (await import('./pages/flow.js')).render],
  [
    /^\/flows\/([0-9a-f-]{36})\/executions\/([0-9a-f-]{36})$/,
    async () => (await import('./pages/execution.js')).render,
  ],
  [/^\/batches\/([0-9a-f-]{36})$/, async () => (await import('./pages/batch.js')).render],
  [/^\/executions(?:\?batch=([0-9a-f-]{36}))?$/, async () => (await import('./pages/executions.js')).render],
  [/^\/executions\/([0-9a-f-]{36})$/, async () => (await import('./pages/execution.js')).renderInline],
  [/^\/collections$/, async () => (await import('./pages/collections.js')).render],
  [/^\/collections\/([0-9a-f-]{36})$/, async () => (await import('./pages/collections.js')).renderOne],
  [/^\/keys$/, async () => (await import('./pages/keys.js')).render],
  [/^\/members$/, async () => (await import('./pages/people.js')).render],
  [/^\/runners$/, async () => (await import('./pages/admin.js')).renderRunners],
  [/^\/audit$/, async () => (await import('./pages/admin.js')).renderAudit],
  [/^\/alerts$/, async () => (await import('./pages/alerts.js')).render],
  [/^\/settings$/, async () => (await import('./pages/admin.js')).renderSettings],
];

const NAV = [
  ['#/webhooks', 'Webhooks'],
  ['#/flows', 'Flows'],
  ['#/executions', 'Executions'],
  ['#/collections', 'Collections'],
  ['#/keys', 'API keys'],
  ['#/members', 'Members'],
  ['#/runners', 'Runners'],
  ['#/alerts', 'Alerts'],
  ['#/audit', 'Audit log'],
  ['#/settings', 'Settings'],
];

const root = document.getElementById('root');
let cleanup = null;

function route() {
  return (location.hash || '#/webhooks').slice(1);
}

function frame(main) {
  const switcher = h(
    'select',
    {
      id: 'organization',
      'aria-label': 'Organization',
      onchange: (e) => {
        chooseOrganization(e.target.value);
        show();
      },
    },
    session.organizations.map((o) =>
      h('option', { value: o.id, selected: session.org && o.id === session.org.id }, `${o.name} (${o.role})`),
    ),
  );
  const current = route();
  const nav = h(
    'nav',
    { 'aria-label': 'Main' },
    h(
      'ul',
      {},
      NAV.map(([href, label]) =>
        h('li', {}, h('a', { href, 'aria-current': current.startsWith(href.slice(1)) ? 'page' : false }, label)),
      ),
    ),
  );
  const header = h(
    'header',
    { class: 'top' },
    h('a', { href: '#/webhooks', class: 'brand' }, 'hookflow'),
    switcher,
    h('span', { class: 'who' }, session.user ? session.user.email : ''),
    h(
      'button',
      {
        type: 'button',
        id: 'sign-out',
        onclick: async () => {
          await signOut();
          location.hash = '#/signin';
          show();
        },
      },
      'Sign out',
    ),
  );
  return fill(root, header, h('div', { class: 'layout' }, nav, main));
}

function landing() {
  return invite.pending() ? '#/invite' : '#/webhooks';
}

async function show() {
  if (cleanup) {
    cleanup();
    cleanup = null;
  }
  const invited = /^\/invite\/([A-Za-z0-9_]+)$/.exec(route());
  if (invited) invite.hold(invited[1]);
  recovery.hold(route());
  const path = route();
  if (recovery.PATHS.includes(path)) {
    const main = h('main', { id: 'main', class: 'narrow' });
    fill(root, main);
    await recovery.render(main, path, {
      onSignedIn: async () => {
        await loadSession();
        location.hash = landing();
        show();
      },
    });
    return;
  }
  if (!session.token || path === '/signin' || session.passwordChangeRequired) {
    const main = h('main', { id: 'main', class: 'narrow' });
    fill(root, main);
    await signin.render(main, {
      onSignedIn: async () => {
        await loadSession();
        location.hash = landing();
        show();
      },
    });
    return;
  }
  if (path === '/invite' && invite.pending()) {
    const main = h('main', { id: 'main', class: 'narrow' });
    fill(root, main);
    await invite.render(main, {
      onAccepted: async (joined) => {
        await loadSession();
        if (joined) chooseOrganization(joined.id);
        location.hash = '#/webhooks';
        show();
      },
    });
    return;
  }
  if (!session.organizations.length) {
    fill(
      root,
      h(
        'main',
        { class: 'narrow' },
        h('h1', {}, 'No organization yet'),
        h('p', {}, 'Ask an owner or admin for an invitation link and open it here.'),
      ),
    );
    return;
  }
  const main = h('main', { id: 'main' });
  frame(main);
  for (const [pattern, load] of ROUTES) {
    const match = pattern.exec(path);
    if (match) {
      try {
        const render = await load();
        cleanup = (await render(main, match.slice(1))) || null;
      } catch (error) {
        fill(
          main,
          h('h1', {}, 'Something went wrong'),
          h('p', { class: 'notice notice-error', role: 'alert' }, error.message),
        );
      }
      return;
    }
  }
  fill(main, h('h1', {}, 'Not found'), h('p', {}, 'No page at this address.'));
}

async function start() {
  try {
    if (await finishExternalSignIn()) {
      // Someone new through an external provider is nobody here until they accept the invitation they hold.
      if (invite.pending()) {
        history.replaceState(null, '', '/#/invite');
      } else {
        await loadSession();
      }
    } else if (mayHaveSession()) {
      // Only a browser that signed in asks: a first visit would log the refusal (401) in the console.
      await refresh();
      await loadSession();
    }
  } catch {
    session.token = null;
  }
  show();
}

window.addEventListener('hashchange', show);
window.addEventListener('hookflow:signed-out', () => {
  location.hash = '#/signin';
});
start();
