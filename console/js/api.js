// @ts-check
// The API client of the app: the session (access token in memory only; the refresh token lives in the server's
// HttpOnly cookie and is used with the CSRF header), the chosen organization, and calls that refresh once on 401.

const CSRF = { 'X-Hookflow-CSRF': '1' };
const ORG_KEY = 'hookflow.organization';
/** Set while this browser holds a refresh cookie, so a first visit does not ask for a refresh it would be refused. */
const SIGNED_IN_KEY = 'hookflow.signed-in';

export const session = {
  token: null,
  user: null,
  organizations: [],
  org: null,
  passwordChangeRequired: false,
};

/** An answer the API refused: its status, the contract's error code and message. */
export class ApiError extends Error {
  constructor(status, code, message, requestId) {
    super(message);
    this.status = status;
    this.code = code;
    this.requestId = requestId;
  }
}

/** The error a refused answer stands for (its status, and the contract's error body when it has one). */
export async function refusal(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    /* not the contract's body */
  }
  const error = body && body.error;
  return new ApiError(
    response.status,
    error ? error.code : 'error',
    error ? error.message : `the server answered ${response.status}`,
    error ? error.request_id : null,
  );
}

/** Takes a sign-in answer: the access token, the person; the refresh token stayed in the cookie. */
function adopt(answer) {
  localStorage.setItem(SIGNED_IN_KEY, '1');
  session.token = answer.access_token;
  session.user = answer.user;
  session.passwordChangeRequired = Boolean(answer.password_change_required);
}

/** Whether this browser may hold a session to restore (it signed in and has not signed out since). */
export function mayHaveSession() {
  return localStorage.getItem(SIGNED_IN_KEY) === '1';
}

/** Trades the refresh cookie for a new access token. Tabs take turns (a refresh token is single use). */
export async function refresh() {
  const run = async () => {
    const response = await fetch('/auth/sessions/refresh', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { ...CSRF, 'Content-Type': 'application/json' },
      body: '{}',
    });
    if (!response.ok) {
      if (response.status === 401) localStorage.removeItem(SIGNED_IN_KEY);
      throw await refusal(response);
    }
    adopt(await response.json());
  };
  if (navigator.locks) return navigator.locks.request('hookflow-refresh', run);
  return run();
}

export async function signIn(email, password) {
  const response = await fetch('/auth/sessions', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { ...CSRF, 'Content-Type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
  if (!response.ok) throw await refusal(response);
  adopt(await response.json());
}

/** Confirms a sign-up with its mailed token: the account is made and signed in (the refresh token in the cookie). */
export async function confirmSignUp(token) {
  const response = await fetch('/auth/signup/confirm', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { ...CSRF, 'Content-Type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  if (!response.ok) throw await refusal(response);
  adopt(await response.json());
}

/** Uses an external provider's access token as the session's bearer token. */
export function adoptExternal(token) {
  session.token = token;
}

export async function signOut() {
  try {
    await call('DELETE', '/auth/session');
  } catch {
    /* the session may already be gone */
  }
  localStorage.removeItem(SIGNED_IN_KEY);
  session.token = null;
  session.user = null;
  session.organizations = [];
  session.org = null;
}

/** Reads who is signed in and their organizations; keeps the chosen organization when still a member. */
export async function loadSession() {
  const info = await call('GET', '/auth/session');
  session.user = info.user;
  session.organizations = info.organizations;
  session.passwordChangeRequired = Boolean(info.password_change_required);
  const saved = localStorage.getItem(ORG_KEY);
  const chosen = info.organizations.find((o) => o.id === saved) || info.organizations[0] || null;
  session.org = chosen;
  return info;
}

export function chooseOrganization(id) {
  session.org = session.organizations.find((o) => o.id === id) || session.org;
  if (session.org) localStorage.setItem(ORG_KEY, session.org.id);
}

const ROLE_WRITES = {
  owner: null,
  admin: null,
  member: ['keys:write', 'organization:write', 'runners:write'],
};

/** Whether the person's role in the chosen organization grants `scope` (the API decides; this hides buttons). */
export function can(scope) {
  const role = session.org && session.org.role;
  if (!role) return false;
  if (scope.endsWith(':read')) return true;
  if (role === 'viewer') return false;
  const refused = ROLE_WRITES[role];
  return !refused || !refused.includes(scope);
}

/** The headers of an authenticated call. */
/**
 * The headers that carry the session (and the chosen organization) on a request to `path`.
 * @param {string} path
 * @returns {Record<string, string>}
 */
export function authHeaders(path) {
  /** @type {Record<string, string>} */
  const headers = {};
  if (session.token) headers.Authorization = `Bearer ${session.token}`;
  if (session.org && !path.startsWith('/auth') && path !== '/organizations')
    headers['X-Organization-Id'] = session.org.id;
  return headers;
}

/**
 * Calls the API; answers the parsed JSON (or null for 204). `raw: true` answers the Response. A 401 refreshes the
 * session once and tries again.
 */
export async function call(method, path, body, options = {}) {
  const send = () => {
    const headers = { ...authHeaders(path), ...(options.headers || {}) };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    return fetch(path, {
      method,
      headers,
      credentials: 'same-origin',
      signal: options.signal,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  };
  let response = await send();
  if (response.status === 401 && !path.startsWith('/auth/sessions')) {
    try {
      await refresh();
      response = await send();
    } catch {
      session.token = null;
      window.dispatchEvent(new Event('hookflow:signed-out'));
    }
  }
  if (!response.ok) throw await refusal(response);
  if (options.raw) return response;
  if (response.status === 204) return null;
  const type = response.headers.get('content-type') || '';
  return type.includes('json') ? response.json() : response.text();
}

/** Every page of a list (at most `max` items). */
export async function all(path, max = 1000) {
  const items = [];
  let cursor = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const page = await call('GET', `${path}${sep}limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor && items.length < max);
  return items;
}
