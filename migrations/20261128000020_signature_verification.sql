-- Signature verification: an endpoint's settings (without secrets) and its secrets, sealed like organization
-- secrets (XChaCha20-Poly1305 under the master key, name `webhook-verification:<webhook id>`, a JSON array of 1 or
-- 2 strings); every capture's verdict; per-minute valid/invalid counts for analytics.
ALTER TABLE webhooks
    ADD COLUMN verification        jsonb,
    ADD COLUMN verification_secrets bytea,
    ADD COLUMN verification_nonce   bytea,
    ADD COLUMN verification_key_version integer,
    ADD CONSTRAINT webhooks_verification_sealed CHECK (
        (verification IS NULL) = (verification_secrets IS NULL)
        AND (verification_secrets IS NULL) = (verification_nonce IS NULL)
        AND (verification_nonce IS NULL) = (verification_key_version IS NULL));

ALTER TABLE captures
    ADD COLUMN signature_verdict text NOT NULL DEFAULT 'unverified'
        CHECK (signature_verdict IN ('valid', 'invalid', 'missing', 'unverified', 'duplicate')),
    ADD COLUMN signature_scheme text,
    ADD COLUMN signature_reason text,
    ADD COLUMN signature_secret_index smallint,
    -- Standard Webhooks' `webhook-id` of a validly signed capture: a second one on the endpoint is a duplicate.
    ADD COLUMN signature_message_id text;

CREATE INDEX captures_signature_message ON captures (webhook_id, signature_message_id)
    WHERE signature_message_id IS NOT NULL;

ALTER TABLE capture_counts
    ADD COLUMN valid bigint NOT NULL DEFAULT 0,
    ADD COLUMN invalid bigint NOT NULL DEFAULT 0;
