-- People: users, their memberships and pending invitations, browser sessions with single-use refresh tokens, the
-- built-in identity provider's signing keys, and identities at external providers.

CREATE TABLE users (
    id                        uuid PRIMARY KEY,
    -- Lower-cased; one user per address.
    email                     text NOT NULL UNIQUE CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 254),
    -- argon2id in PHC format; NULL for users who sign in only through an external provider.
    password_hash             text,
    -- A one-time password was set (operator command or first start): the next session must change it.
    password_change_required  boolean NOT NULL DEFAULT false,
    created_at                timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE memberships (
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id          uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role             text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, user_id)
);
CREATE INDEX memberships_user ON memberships (user_id);

-- An email invited before it has a user: bound at that person's first sign-in (or creation).
CREATE TABLE invitations (
    id               uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    email            text NOT NULL CHECK (email = lower(email)),
    role             text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    invited_by       text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, email)
);
CREATE INDEX invitations_email ON invitations (email);

-- A sign-in of the built-in provider. Access tokens name it (`sid`); revoking it ends them at once.
CREATE TABLE sessions (
    id           uuid PRIMARY KEY,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- The session's absolute end: refreshing never extends it.
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz
);
CREATE INDEX sessions_user ON sessions (user_id);

-- Refresh tokens, hashed. Each is used once; presenting a used one again revokes its session (it was stolen).
CREATE TABLE refresh_tokens (
    token_hash   bytea PRIMARY KEY,
    session_id   uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    used_at      timestamptz
);
CREATE INDEX refresh_tokens_session ON refresh_tokens (session_id);

-- Ed25519 keys the built-in provider signs access tokens with; the private half sealed under the master key.
CREATE TABLE signing_keys (
    kid          text PRIMARY KEY,
    private_key  bytea NOT NULL,
    nonce        bytea NOT NULL,
    key_version  integer NOT NULL,
    public_key   bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- A user's identity at an external OpenID provider.
CREATE TABLE user_identities (
    issuer      text NOT NULL,
    subject     text NOT NULL,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issuer, subject)
);

-- Keys made by a person stop working when that person leaves the organization, and never grant more than the
-- person's role.
ALTER TABLE api_keys ADD COLUMN created_by_user uuid REFERENCES users (id) ON DELETE CASCADE;
