-- Issue #50 (email): the one-time tokens mail links carry, stored as their SHA-256 only.

-- A password reset of a built-in account: valid 30 minutes, used once.
CREATE TABLE password_resets (
    token_hash  bytea PRIMARY KEY,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);
CREATE INDEX password_resets_user ON password_resets (user_id, created_at);

-- A sign-up waiting for its email to be confirmed: the account is made from this row when the link is used.
CREATE TABLE signup_confirmations (
    token_hash         bytea PRIMARY KEY,
    email              text NOT NULL,
    password_hash      text NOT NULL,
    organization_name  text NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    expires_at         timestamptz NOT NULL,
    used_at            timestamptz
);
CREATE INDEX signup_confirmations_email ON signup_confirmations (email, created_at);
