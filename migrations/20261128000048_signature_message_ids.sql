-- Standard Webhooks `webhook-id`s an endpoint received, remembered apart from the captures (issue #47): a replay
-- of an id whose capture retention removed is still a duplicate while its signed timestamp could be within the
-- tolerance. A row is written by a trigger with the capture that carries the id, so the capture and its id commit
-- together (a capture that was not stored leaves no id), and lives until twice the endpoint's tolerance after
-- receipt (at least 2 minutes; the retention task removes expired rows). Only the id's SHA-256 is kept: rows of
-- a fixed size whatever the sender puts in the header.
CREATE TABLE signature_message_ids (
    webhook_id  uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    id_sha256   bytea NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (webhook_id, id_sha256)
);
CREATE INDEX signature_message_ids_expiry ON signature_message_ids (expires_at);

CREATE FUNCTION hookflow_keep_message_id() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO signature_message_ids AS m (webhook_id, id_sha256, expires_at)
    SELECT NEW.webhook_id, sha256(convert_to(NEW.signature_message_id, 'UTF8')),
           NEW.received_at
               + make_interval(secs => 2 * GREATEST(60, COALESCE((w.verification->>'tolerance_s')::int, 300)))
    FROM webhooks w WHERE w.id = NEW.webhook_id
    ON CONFLICT (webhook_id, id_sha256) DO UPDATE SET expires_at = GREATEST(m.expires_at, EXCLUDED.expires_at);
    RETURN NULL;
END;
$$;

CREATE TRIGGER captures_keep_message_id AFTER INSERT ON captures
    FOR EACH ROW WHEN (NEW.signature_message_id IS NOT NULL AND NEW.webhook_id IS NOT NULL)
    EXECUTE FUNCTION hookflow_keep_message_id();

-- The ids of captures stored before this migration.
INSERT INTO signature_message_ids (webhook_id, id_sha256, expires_at)
SELECT c.webhook_id, sha256(convert_to(c.signature_message_id, 'UTF8')),
       max(c.received_at) + make_interval(secs => 2 * GREATEST(60, COALESCE((w.verification->>'tolerance_s')::int, 300)))
FROM captures c JOIN webhooks w ON w.id = c.webhook_id
WHERE c.signature_message_id IS NOT NULL
GROUP BY c.webhook_id, c.signature_message_id, w.verification
ON CONFLICT DO NOTHING;
