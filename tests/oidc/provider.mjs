// A real OpenID provider (oidc-provider) for hookflow's external sign-in tests. It listens on 127.0.0.1 on a port
// of its own choosing and prints one JSON line: its issuer and, for tests that forge tokens with its real key, the
// RSA private key (PKCS#1 DER, base64) it signs access tokens with. Access tokens are JWTs (RFC 9068) for the resource
// `urn:hookflow:api` with the audience given as the first argument, carrying the account's verified email.
// Sign-in uses the provider's development login and consent pages (any login; the login is the subject).
// Two clients: a confidential one the API tests script over HTTP, and the app's public one (PKCE) for the browser.
// GET /test/counts answers how many requests each path got.
import crypto from 'node:crypto';
import http from 'node:http';
import Provider from 'oidc-provider';
import * as jose from 'jose';

// Standard output carries the one JSON line the test reads; the provider's own notices go to standard error.
console.log = console.info = (...args) => process.stderr.write(`${args.join(' ')}\n`);

const audience = process.argv[2] || 'hookflow-api';
const resource = 'urn:hookflow:api';
const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
const jwk = { ...(await jose.exportJWK(privateKey)), kid: 'test-rsa-1', alg: 'RS256', use: 'sig' };
const pkcs1 = crypto.createPrivateKey(await jose.exportPKCS8(privateKey)).export({ type: 'pkcs1', format: 'der' });

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;
const email = (id) => `${id}@example.com`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: 'hookflow-app',
    client_secret: 'test-secret',
    redirect_uris: ['http://127.0.0.1/callback'],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
  }, {
    // The app's public client: the browser runs the authorization code flow with PKCE, no secret. A native
    // client's loopback redirect may use any port (RFC 8252), so the app's test server can listen anywhere.
    client_id: 'hookflow-browser',
    application_type: 'native',
    redirect_uris: ['http://127.0.0.1/'],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  }],
  // The app on a loopback port calls the token endpoint from the page.
  clientBasedCORS: (ctx, origin, client) =>
    client.clientAuthMethod === 'none' && /^http:\/\/127\.0\.0\.1(:\d+)?$/.test(origin),
  jwks: { keys: [jwk] },
  cookies: { keys: ['hookflow-test-cookie-key'] },
  claims: { openid: ['sub'], email: ['email', 'email_verified'] },
  features: {
    devInteractions: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({
        scope: 'api',
        audience,
        accessTokenFormat: 'jwt',
        accessTokenTTL: 300,
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
  async findAccount(ctx, id) {
    return { accountId: id, async claims() { return { sub: id, email: email(id), email_verified: true }; } };
  },
  async extraTokenClaims(ctx, token) {
    return { email: email(token.accountId), email_verified: true };
  },
});
// Requests per path, served at /test/counts (the tests check how often hookflow fetched the keys).
const counts = {};
const handle = provider.callback();
server.on('request', (req, res) => {
  const path = req.url.split('?')[0];
  if (path === '/test/counts') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(counts));
    return;
  }
  counts[path] = (counts[path] || 0) + 1;
  handle(req, res);
});
process.stdout.write(`${JSON.stringify({ issuer, resource, private_key_pkcs1: pkcs1.toString('base64'), kid: jwk.kid })}\n`);
