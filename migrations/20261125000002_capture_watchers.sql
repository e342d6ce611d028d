-- Replicas with live subscribers per endpoint. A capture batch NOTIFYs only endpoints someone watches: a NOTIFY takes
-- a cluster-wide lock at commit, and most endpoints have no open stream. Each replica refreshes its rows every
-- minute; a row not refreshed for five minutes (its replica died) no longer counts, and retention removes it.
CREATE TABLE capture_watchers (
    webhook_id uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    replica    uuid NOT NULL,
    seen_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (webhook_id, replica)
);
