-- Foundation: organizations, API keys and the audit log.
-- Every table that holds tenant data carries organization_id; every query filters on it.

CREATE TABLE organizations (
    id                        uuid PRIMARY KEY,
    name                      text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    -- Defaults applied to webhook endpoints that set none of their own (NULL = keep forever / unbounded).
    default_max_age_days      integer CHECK (default_max_age_days > 0),
    default_max_requests      bigint CHECK (default_max_requests > 0),
    default_max_body_bytes    bigint NOT NULL DEFAULT 1048576 CHECK (default_max_body_bytes BETWEEN 1 AND 10485760),
    capture_rate_limit_per_s  integer NOT NULL DEFAULT 1000 CHECK (capture_rate_limit_per_s > 0),
    created_at                timestamptz NOT NULL DEFAULT now()
);

-- API keys: only the SHA-256 of the secret is stored, plus a display prefix that is not secret.
CREATE TABLE api_keys (
    id               uuid PRIMARY KEY,
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    prefix           text NOT NULL,
    key_hash         bytea NOT NULL UNIQUE,
    scopes           text[] NOT NULL,
    expires_at       timestamptz,
    created_by       text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    last_used_at     timestamptz
);
-- Listing a tenant's keys newest first (ids are UUIDv7, so id order is creation order).
CREATE INDEX api_keys_org_id ON api_keys (organization_id, id DESC);

-- Security-relevant changes, newest first per organization.
CREATE TABLE audit_log (
    id               uuid PRIMARY KEY,
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    action           text NOT NULL,
    actor            text NOT NULL,
    target           text NOT NULL,
    details          jsonb NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_org_id ON audit_log (organization_id, id DESC);
