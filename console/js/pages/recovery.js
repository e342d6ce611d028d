// @ts-check
// The pages of mailed links, for people not signed in: "Forgot password?" (asks for a reset mail), the reset page
// a mail's link opens (`#/reset-password/<token>`: choose a new password) and the sign-up confirmation page
// (`#/signup/confirm/<token>`: makes the account and signs in). A link's token leaves the address bar at once and
// waits in sessionStorage until it is used.

import { h, field, notice, fill } from '../dom.js';
import { call, confirmSignUp } from '../api.js';

const HELD = { '/reset-password': 'hookflow.reset', '/signup/confirm': 'hookflow.signup' };

/** The routes of this module. */
export const PATHS = ['/forgot-password', '/reset-password', '/signup/confirm'];

/** Takes a mailed link's token out of the address; answers whether the route had one. */
export function hold(route) {
  const link = /^\/(reset-password|signup\/confirm)\/([A-Za-z0-9_]+)$/.exec(route);
  if (!link) return false;
  const path = `/${link[1]}`;
  sessionStorage.setItem(HELD[path], link[2]);
  history.replaceState(null, '', `/#${path}`);
  return true;
}

/**
 * @param {HTMLElement} main
 * @param {string} path one of PATHS
 * @param {{ onSignedIn: () => Promise<void> }} options
 */
export async function render(main, path, { onSignedIn }) {
  if (path === '/forgot-password') return forgot(main);
  if (path === '/reset-password') return reset(main, sessionStorage.getItem(HELD[path]));
  return confirm(main, sessionStorage.getItem(HELD[path]), onSignedIn);
}

function forgot(main) {
  const error = notice();
  const email = h('input', { type: 'email', name: 'email', autocomplete: 'username', required: true });
  const form = h(
    'form',
    { class: 'card', 'aria-label': 'Reset your password' },
    h('h1', {}, 'Forgot your password?'),
    h('p', {}, 'Give the email of your account: a link to choose a new password will be mailed to it.'),
    error,
    field('Email', email),
    h('button', { type: 'submit', class: 'primary', id: 'send-reset' }, 'Send the link'),
    h('p', {}, h('a', { href: '#/signin' }, 'Back to sign-in')),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      await call('POST', '/auth/password-reset', { email: email.value.trim() });
      fill(
        main,
        h(
          'div',
          { class: 'card', id: 'reset-sent' },
          h('h1', {}, 'Check your mail'),
          h('p', {}, 'If an account has this email, a link is on its way. It works once, within 30 minutes.'),
          h('p', {}, h('a', { href: '#/signin' }, 'Back to sign-in')),
        ),
      );
    } catch (e) {
      error.show(e);
    }
  });
  fill(main, form);
  email.focus();
}

function spent(main, title) {
  fill(
    main,
    h(
      'div',
      { class: 'card' },
      h('h1', {}, title),
      h('p', {}, 'This link was used already, or it is not a link of this server. Ask for a new one.'),
      h('p', {}, h('a', { href: '#/signin' }, 'Go to sign-in')),
    ),
  );
}

function reset(main, token) {
  if (!token) return spent(main, 'No reset link');
  const error = notice();
  const password = h('input', {
    type: 'password',
    name: 'new-password',
    autocomplete: 'new-password',
    minlength: 12,
    required: true,
  });
  const form = h(
    'form',
    { class: 'card', 'aria-label': 'Choose a new password' },
    h('h1', {}, 'Choose a new password'),
    h('p', {}, 'At least 12 characters. Saving it signs you out everywhere.'),
    error,
    field('New password', password),
    h('button', { type: 'submit', class: 'primary', id: 'save-password' }, 'Save the password'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      await call('POST', '/auth/password-reset/confirm', { token, password: password.value });
      sessionStorage.removeItem(HELD['/reset-password']);
      fill(
        main,
        h(
          'div',
          { class: 'card', id: 'password-reset' },
          h('h1', {}, 'Your password is changed'),
          h('p', {}, 'Every session you had is ended. Sign in with the new password.'),
          h('p', {}, h('a', { href: '#/signin' }, 'Sign in')),
        ),
      );
    } catch (e) {
      if (e.code === 'invalid_token') sessionStorage.removeItem(HELD['/reset-password']);
      error.show(e.code === 'invalid_token' ? 'This link is used, expired or unknown: ask for a new one.' : e);
    }
  });
  fill(main, form);
  password.focus();
}

function confirm(main, token, onSignedIn) {
  if (!token) return spent(main, 'No confirmation link');
  const error = notice();
  const button = h(
    'button',
    {
      type: 'button',
      class: 'primary',
      id: 'confirm-signup',
      onclick: async () => {
        try {
          await confirmSignUp(token);
          sessionStorage.removeItem(HELD['/signup/confirm']);
          await onSignedIn();
        } catch (e) {
          if (e.code === 'invalid_token') sessionStorage.removeItem(HELD['/signup/confirm']);
          error.show(e.code === 'invalid_token' ? 'This link is used, expired or unknown: sign up again.' : e);
        }
      },
    },
    'Confirm and sign in',
  );
  fill(
    main,
    h(
      'div',
      { class: 'card' },
      h('h1', {}, 'Confirm your email'),
      h(
        'p',
        {},
        'Confirming makes your account and its organization with the password chosen at sign-up, and signs you in. ' +
          'If you did not sign up yourself, close this page.',
      ),
      error,
      h('p', {}, button),
    ),
  );
}
