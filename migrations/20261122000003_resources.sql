-- Organization resources: write-only secrets (encrypted) and plain variables.

-- A secret is XChaCha20-Poly1305 ciphertext under the server's master key, with a random nonce per value; the
-- associated data binds organization, name and key version, so a ciphertext moved to another row fails to open.
CREATE TABLE secrets (
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name             text NOT NULL,
    ciphertext       bytea NOT NULL,
    nonce            bytea NOT NULL,
    key_version      integer NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, name)
);

CREATE TABLE variables (
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name             text NOT NULL,
    value            text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, name)
);
