// @ts-check
// Sign-in: email and password with the built-in provider (and the first sign-in's password change), or a button
// per external OpenID provider the operator configured; "Forgot password?" when the server sends mail.

import { h, field, notice, fill } from '../dom.js';
import { signIn, call, session } from '../api.js';
import { startExternalSignIn } from '../oidc.js';

export async function render(main, { onSignedIn }) {
  if (session.token && session.passwordChangeRequired) return changePassword(main, onSignedIn);
  const error = notice();
  const email = h('input', { type: 'email', name: 'email', autocomplete: 'username', required: true });
  const password = h('input', { type: 'password', name: 'password', autocomplete: 'current-password', required: true });
  const form = h(
    'form',
    { class: 'card', 'aria-label': 'Sign in' },
    h('h1', {}, 'Sign in to hookflow'),
    error,
    field('Email', email),
    field('Password', password),
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.show('');
    try {
      await signIn(email.value.trim(), password.value);
      // The one-time password was just typed: the next form does not ask for it again.
      if (session.passwordChangeRequired) return changePassword(main, onSignedIn, password.value);
      await onSignedIn();
    } catch (e) {
      error.show(e.status === 401 ? 'Wrong email or password.' : e);
    }
  });
  fill(main, form);
  try {
    const config = await (await fetch('/app/config.json')).json();
    if (config.mail) {
      form.append(
        h('p', { class: 'forgot' }, h('a', { href: '#/forgot-password', id: 'forgot-password' }, 'Forgot password?')),
      );
    }
    if (config.providers.length) {
      form.append(
        h('p', { class: 'or' }, 'or'),
        ...config.providers.map((provider) =>
          h(
            'button',
            {
              type: 'button',
              class: 'external',
              onclick: () => startExternalSignIn(provider).catch((e) => error.show(e)),
            },
            `Sign in with ${new URL(provider.issuer).host}`,
          ),
        ),
      );
    }
  } catch {
    /* no external providers */
  }
  email.focus();
}

/**
 * The first sign-in's password change. `oneTime` is the one-time password when the person typed it on this page;
 * after a reload it is asked for again (the app never stores it).
 * @param {HTMLElement} main
 * @param {{ (): Promise<void> }} onSignedIn
 * @param {string} [oneTime]
 */
function changePassword(main, onSignedIn, oneTime) {
  const error = notice();
  const current = h('input', { type: 'password', autocomplete: 'current-password', required: true });
  current.value = oneTime || '';
  const next = h('input', { type: 'password', autocomplete: 'new-password', minlength: 12, required: true });
  const form = h(
    'form',
    { class: 'card', 'aria-label': 'Choose a password' },
    h('h1', {}, 'Choose your password'),
    h('p', {}, 'You signed in with a one-time password. Choose your own (at least 12 characters) to go on.'),
    error,
    oneTime ? null : field('One-time password', current),
    field('New password', next),
    h('button', { type: 'submit', class: 'primary' }, 'Save and continue'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      await call('PUT', '/auth/password', { current_password: current.value, new_password: next.value });
      session.passwordChangeRequired = false;
      await onSignedIn();
    } catch (e) {
      error.show(e);
    }
  });
  fill(main, form);
  (oneTime ? next : current).focus();
}
