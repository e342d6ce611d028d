// @ts-check
// Signatures in the app: the verdict badge of a capture, the reason and a re-check (with a candidate secret) on its
// detail, and the verification settings of an endpoint's form (scheme, secrets written once and never shown, mode).

import { h, field } from '../dom.js';
import { call } from '../api.js';

export const SCHEMES = [
  'stripe',
  'github',
  'slack',
  'shopify',
  'standard_webhooks',
  'twilio',
  'paddle',
  'gitlab',
  'linear',
  'zoom',
  'square',
  'discord',
  'hmac',
];

/** A capture's verdict as a badge (nothing for endpoints that verify nothing). */
export function signatureBadge(signature) {
  if (!signature || signature.verdict === 'unverified') return null;
  const title = signature.reason ? `${signature.verdict}: ${signature.reason}` : `signature ${signature.verdict}`;
  return h(
    'span',
    { class: `sig sig-${signature.verdict}`, 'data-verdict': signature.verdict, title },
    signature.verdict,
  );
}

/** The signature lines of a capture's facts, with a re-check. */
export function signatureFacts(webhook, capture) {
  const signature = capture.signature || { verdict: 'unverified' };
  if (signature.verdict === 'unverified') return [h('dt', {}, 'Signature'), h('dd', {}, 'not verified')];
  const out = h('div', { id: 'recheck-result', class: 'muted' });
  const candidate = h('input', {
    type: 'password',
    autocomplete: 'off',
    placeholder: 'candidate secret (not stored)',
    'aria-label': 'Candidate secret',
  });
  const recheck = h(
    'form',
    { class: 'inline' },
    candidate,
    h('button', { type: 'submit', class: 'small' }, 'Re-check'),
  );
  recheck.addEventListener('submit', async (event) => {
    event.preventDefault();
    const body = candidate.value ? { secret: candidate.value } : {};
    try {
      const r = await call('POST', `/webhooks/${webhook.id}/requests/${capture.id}/verify`, body);
      const expected = r.expected
        ? ` Signed bytes SHA-256 ${r.expected.signed_content_sha256.slice(0, 16)}…, expected a signature starting ${r.expected.signature_prefix}.`
        : '';
      out.textContent = `${r.verdict}${r.reason ? `: ${r.reason}` : ''}.${expected}`;
    } catch (e) {
      out.textContent = e.message;
    }
  });
  const secret =
    signature.secret_index === null || signature.secret_index === undefined
      ? ''
      : ` (secret ${signature.secret_index + 1})`;
  return [
    h('dt', {}, 'Signature'),
    h(
      'dd',
      { id: 'signature' },
      signatureBadge(signature),
      ' ',
      signature.scheme || '',
      secret,
      signature.reason ? h('p', { id: 'signature-reason' }, signature.reason) : null,
      recheck,
      out,
    ),
  ];
}

/** The verification part of an endpoint's form; `value()` answers what to send (`undefined`: keep as stored). */
export function verificationFields(webhook) {
  const current = webhook && webhook.verification;
  const scheme = h(
    'select',
    { name: 'scheme', id: 'verification-scheme' },
    h('option', { value: '' }, 'no verification'),
    SCHEMES.map((s) => h('option', { value: s }, s)),
  );
  scheme.value = current ? current.scheme : '';
  const secret = (n) => h('input', { type: 'password', name: `secret-${n}`, autocomplete: 'off', maxlength: 1024 });
  const secrets = [secret(1), secret(2)];
  const mode = h(
    'select',
    { name: 'mode' },
    h('option', { value: 'record' }, 'record: store and flag'),
    h('option', { value: 'enforce' }, 'enforce: answer 401 to bad signatures'),
    h('option', { value: 'reject' }, 'reject: answer 401 and store nothing'),
  );
  mode.value = current ? current.mode : 'record';
  const tolerance = h('input', {
    type: 'number',
    name: 'tolerance_s',
    min: 0,
    max: 604800,
    value: current ? current.tolerance_s : 300,
  });
  const text = (name, hint) =>
    h('input', { name, placeholder: hint, value: current && current[name] ? current[name] : '' });
  const hmac = {
    header: text('header', 'X-Signature'),
    prefix: text('prefix', 'sha256='),
    timestamp_header: text('timestamp_header', 'X-Timestamp'),
    separator: text('separator', '.'),
  };
  const choice = (name, values) => {
    const el = h(
      'select',
      { name },
      values.map((v) => h('option', { value: v }, v)),
    );
    el.value = (current && current[name]) || values[0];
    return el;
  };
  const algorithm = choice('algorithm', ['sha256', 'sha1', 'sha512']);
  const encoding = choice('encoding', ['hex', 'base64']);
  const generic = h(
    'fieldset',
    { class: 'stack' },
    h('legend', {}, 'Generic HMAC'),
    field('Header', hmac.header),
    field('Algorithm', algorithm),
    field('Encoding', encoding),
    field('Prefix', hmac.prefix),
    field('Timestamp header', hmac.timestamp_header),
    field('Separator', hmac.separator),
  );
  const kept = current
    ? `${current.secrets_count} stored; leave empty to keep them.`
    : 'Shown once: never displayed again.';
  const show = () => {
    generic.hidden = scheme.value !== 'hmac';
  };
  scheme.addEventListener('change', show);
  show();
  const part = h(
    'fieldset',
    { class: 'stack', id: 'verification' },
    h('legend', {}, 'Signature verification'),
    field('Scheme', scheme),
    field('Secret', secrets[0], kept),
    field('Second secret (rotation)', secrets[1]),
    field('Mode', mode),
    field('Timestamp tolerance (s)', tolerance),
    generic,
  );
  const value = () => {
    if (!scheme.value) return current ? null : undefined;
    const given = secrets.map((s) => s.value).filter(Boolean);
    const changed =
      !current ||
      current.scheme !== scheme.value ||
      current.mode !== mode.value ||
      current.tolerance_s !== Number(tolerance.value);
    if (!given.length && !changed && scheme.value !== 'hmac') return undefined;
    if (!given.length) throw new Error('Enter the secret again to change the verification (secrets are never shown).');
    const v = { scheme: scheme.value, secrets: given, mode: mode.value, tolerance_s: Number(tolerance.value) };
    if (scheme.value === 'hmac') {
      v.header = hmac.header.value;
      v.algorithm = algorithm.value;
      v.encoding = encoding.value;
      if (hmac.prefix.value) v.prefix = hmac.prefix.value;
      if (hmac.timestamp_header.value) {
        v.timestamp_header = hmac.timestamp_header.value;
        v.separator = hmac.separator.value || '.';
      }
    }
    return v;
  };
  return { part, value };
}
