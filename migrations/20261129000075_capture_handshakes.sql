-- Issue #51, part B: an endpoint answers a provider's URL check (`handshake`, a preset and an optional secret of
-- its own, sealed like verification secrets under the name `webhook-handshake:<webhook id>`); each capture a
-- preset recognised says which; endpoints take bodies up to 32 MiB.
ALTER TABLE webhooks
    ADD COLUMN handshake                text CHECK (handshake IN ('slack', 'meta', 'msgraph', 'zoom', 'dropbox',
                                                                  'twitter', 'twitch', 'smartsheet', 'trello')),
    ADD COLUMN handshake_secret         bytea,
    ADD COLUMN handshake_nonce          bytea,
    ADD COLUMN handshake_key_version    integer,
    ADD CONSTRAINT webhooks_handshake_sealed CHECK (
        (handshake_secret IS NULL) = (handshake_nonce IS NULL)
        AND (handshake_nonce IS NULL) = (handshake_key_version IS NULL)
        AND (handshake_secret IS NULL OR handshake IS NOT NULL));

ALTER TABLE webhooks DROP CONSTRAINT webhooks_max_body_bytes_check;
ALTER TABLE webhooks ADD CONSTRAINT webhooks_max_body_bytes_check CHECK (max_body_bytes BETWEEN 1 AND 33554432);

ALTER TABLE captures ADD COLUMN handshake text;
