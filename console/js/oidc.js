// @ts-check
// External sign-in: the authorization code flow with PKCE, run by the browser as a public client of an OpenID
// provider the operator configured. The server only verifies the access token the provider issues. The PKCE
// verifier and state wait in sessionStorage during the redirect; the token itself stays in memory.

import { adoptExternal } from './api.js';

const PENDING = 'hookflow.oidc';

function base64url(bytes) {
  return btoa(String.fromCharCode(...new Uint8Array(bytes)))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');
}

function random() {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

async function discover(issuer) {
  const response = await fetch(`${issuer}/.well-known/openid-configuration`);
  if (!response.ok) throw new Error(`${issuer} did not describe itself (${response.status})`);
  return response.json();
}

function redirectUri() {
  return `${location.origin}/`;
}

/** Sends the browser to the provider's sign-in page. */
export async function startExternalSignIn(provider) {
  const metadata = await discover(provider.issuer);
  const verifier = random();
  const state = random();
  const challenge = base64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
  sessionStorage.setItem(
    PENDING,
    JSON.stringify({
      state,
      verifier,
      client_id: provider.client_id,
      resource: provider.resource,
      token_endpoint: metadata.token_endpoint,
    }),
  );
  const url = new URL(metadata.authorization_endpoint);
  const params = {
    response_type: 'code',
    client_id: provider.client_id,
    redirect_uri: redirectUri(),
    scope: 'openid email',
    state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  };
  if (provider.resource) params.resource = provider.resource;
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
  location.assign(url.toString());
}

/** On the way back from the provider: trades the code for an access token. Answers whether it signed in. */
export async function finishExternalSignIn() {
  const params = new URLSearchParams(location.search);
  const pending = sessionStorage.getItem(PENDING);
  if (!params.has('code') || !pending) return false;
  sessionStorage.removeItem(PENDING);
  history.replaceState(null, '', '/#/webhooks');
  const { state, verifier, client_id: clientId, resource, token_endpoint: tokenEndpoint } = JSON.parse(pending);
  if (params.get('state') !== state) throw new Error('the sign-in answer does not match the request');
  const form = new URLSearchParams({
    grant_type: 'authorization_code',
    code: params.get('code'),
    redirect_uri: redirectUri(),
    client_id: clientId,
    code_verifier: verifier,
  });
  if (resource) form.set('resource', resource);
  const response = await fetch(tokenEndpoint, { method: 'POST', body: form });
  if (!response.ok) throw new Error(`the provider refused the sign-in (${response.status})`);
  const tokens = await response.json();
  adoptExternal(tokens.access_token);
  return true;
}
