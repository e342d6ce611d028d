-- Hardening III. Invitations bind by a one-time token, never by the email they were sent to (whoever signed up
-- first with an invited address used to become a member). Only the token's SHA-256 is stored; an invitation ends
-- when accepted, withdrawn or expired.
ALTER TABLE invitations ADD COLUMN token_hash bytea UNIQUE;
-- Invitations made before tokens existed can never be accepted: they expire now (an owner or admin invites again).
ALTER TABLE invitations ADD COLUMN expires_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE invitations ALTER COLUMN expires_at DROP DEFAULT;
-- Invitations were looked up by email at sign-in; nothing does that any more.
DROP INDEX invitations_email;

-- External access tokens whose holder signed out (`DELETE /auth/session`): refused on every replica until they
-- expire. Keyed by the token's SHA-256; rows past `expires_at` are deleted by later sign-outs.
CREATE TABLE revoked_tokens (
    token_hash  bytea PRIMARY KEY,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX revoked_tokens_expiry ON revoked_tokens (expires_at);
