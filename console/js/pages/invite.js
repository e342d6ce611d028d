// @ts-check
// An invitation's link (`#/invite/<token>`): the person signed in here (with a password or an external provider)
// accepts it and joins the organization. The token waits in sessionStorage while the person signs in, and leaves
// the address bar at once.

import { h, fill, notice } from '../dom.js';
import { call } from '../api.js';

const PENDING = 'hookflow.invite';

/** Keeps an invitation's token from the address bar until it is accepted; answers the address without it. */
export function hold(token) {
  sessionStorage.setItem(PENDING, token);
  history.replaceState(null, '', '/#/invite');
}

/** The invitation waiting to be accepted, if any. */
export function pending() {
  return sessionStorage.getItem(PENDING);
}

export async function render(main, { onAccepted }) {
  const token = pending();
  const error = notice();
  const accept = h(
    'button',
    {
      type: 'button',
      class: 'primary',
      id: 'accept-invitation',
      onclick: async () => {
        try {
          const joined = await call('POST', '/auth/invitations/accept', { token });
          sessionStorage.removeItem(PENDING);
          await onAccepted(joined);
        } catch (e) {
          error.show(e);
        }
      },
    },
    'Accept the invitation',
  );
  const decline = h(
    'button',
    {
      type: 'button',
      onclick: async () => {
        sessionStorage.removeItem(PENDING);
        try {
          await onAccepted(null);
        } catch (e) {
          error.show(e);
        }
      },
    },
    'Not now',
  );
  fill(
    main,
    h('h1', {}, 'You are invited'),
    h('p', {}, 'Accept to join the organization that invited you, as the person signed in here.'),
    error,
    h('p', {}, accept, ' ', decline),
  );
}
