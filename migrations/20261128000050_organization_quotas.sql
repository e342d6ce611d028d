-- Operating II: quotas per organization on what it stores (stored_bytes: capture bodies and node results), its
-- endpoints, its flows and its captures per UTC day, set by an operator (`hookflow-server orgs limits`); NULL takes
-- the server's default (`--default-stored-bytes`, ...), itself none unless set.
--
-- Usage is counted by the database itself, whoever writes (this release's servers, older replicas, an operator's
-- SQL): statement-level triggers add the bodies of inserted captures (and count them on the UTC day they arrive)
-- and the text of inserted node results, and subtract deleted captures (retention, clearing an endpoint, deleting
-- it or an execution); deleting executions subtracts their node results where it already deletes them. The counts
-- live in `organization_usage`, a row per organization and counter slot (the backend's pid modulo 8, so writers on
-- different connections rarely wait on each other's row); readers sum the slots. Each statement touches its rows in
-- organization order.
--
-- Only adds (columns, a table, triggers) and replaces `executions_delete_children` with a version that deletes the
-- same rows: older replicas keep working. The triggers are made before the usage already stored is summed, in this
-- migration's transaction: inserts into captures and node_results wait for it (one read of both tables).
ALTER TABLE organizations
    ADD COLUMN stored_bytes_limit bigint CHECK (stored_bytes_limit >= 0),
    ADD COLUMN endpoints_limit bigint CHECK (endpoints_limit >= 0),
    ADD COLUMN flows_limit bigint CHECK (flows_limit >= 0),
    ADD COLUMN captures_per_day_limit bigint CHECK (captures_per_day_limit >= 0);

CREATE TABLE organization_usage (
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    slot             smallint NOT NULL,
    stored_bytes     bigint NOT NULL DEFAULT 0,
    -- Captures received on `day` (UTC) through this slot; a later day starts again from the first capture.
    day              date,
    captures         bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (organization_id, slot)
);

CREATE FUNCTION hookflow_usage_slot() RETURNS smallint LANGUAGE sql VOLATILE AS $$
    SELECT (pg_backend_pid() % 8)::smallint
$$;

CREATE FUNCTION captures_count_usage() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO organization_usage AS u (organization_id, slot, stored_bytes, day, captures)
    SELECT organization_id, hookflow_usage_slot(), sum(body_size), (now() AT TIME ZONE 'UTC')::date, count(*)
    FROM stored GROUP BY organization_id ORDER BY organization_id
    ON CONFLICT (organization_id, slot) DO UPDATE SET stored_bytes = u.stored_bytes + EXCLUDED.stored_bytes,
        captures = CASE WHEN u.day = EXCLUDED.day THEN u.captures + EXCLUDED.captures ELSE EXCLUDED.captures END,
        day = EXCLUDED.day;
    RETURN NULL;
END
$$;

CREATE TRIGGER captures_count_usage AFTER INSERT ON captures
    REFERENCING NEW TABLE AS stored FOR EACH STATEMENT EXECUTE FUNCTION captures_count_usage();

-- Subtracts deleted captures' bodies; an organization being deleted (its usage rows go with it) is skipped.
CREATE FUNCTION captures_uncount_usage() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO organization_usage AS u (organization_id, slot, stored_bytes)
    SELECT d.organization_id, hookflow_usage_slot(), -sum(d.body_size)
    FROM deleted d WHERE EXISTS (SELECT 1 FROM organizations o WHERE o.id = d.organization_id)
    GROUP BY d.organization_id ORDER BY d.organization_id
    ON CONFLICT (organization_id, slot) DO UPDATE SET stored_bytes = u.stored_bytes + EXCLUDED.stored_bytes;
    RETURN NULL;
END
$$;

CREATE TRIGGER captures_uncount_usage AFTER DELETE ON captures
    REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION captures_uncount_usage();

-- A node result's size is the length of its JSON text (node results are written once: ON CONFLICT DO NOTHING).
CREATE FUNCTION node_results_count_usage() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO organization_usage AS u (organization_id, slot, stored_bytes)
    SELECT e.organization_id, hookflow_usage_slot(), sum(octet_length(n.result::text))
    FROM stored n JOIN executions e ON e.id = n.execution_id
    GROUP BY e.organization_id ORDER BY e.organization_id
    ON CONFLICT (organization_id, slot) DO UPDATE SET stored_bytes = u.stored_bytes + EXCLUDED.stored_bytes;
    RETURN NULL;
END
$$;

CREATE TRIGGER node_results_count_usage AFTER INSERT ON node_results
    REFERENCING NEW TABLE AS stored FOR EACH STATEMENT EXECUTE FUNCTION node_results_count_usage();

-- As before (20261127000001), and the deleted node results' sizes are subtracted from their organizations'.
CREATE OR REPLACE FUNCTION executions_delete_children() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM jobs WHERE execution_id IN (SELECT id FROM deleted);
    WITH gone AS (
        DELETE FROM node_results WHERE execution_id IN (SELECT id FROM deleted)
        RETURNING execution_id, octet_length(result::text) AS bytes
    )
    INSERT INTO organization_usage AS u (organization_id, slot, stored_bytes)
    SELECT d.organization_id, hookflow_usage_slot(), -sum(g.bytes)
    FROM gone g JOIN deleted d ON d.id = g.execution_id
    WHERE EXISTS (SELECT 1 FROM organizations o WHERE o.id = d.organization_id)
    GROUP BY d.organization_id ORDER BY d.organization_id
    ON CONFLICT (organization_id, slot) DO UPDATE SET stored_bytes = u.stored_bytes + EXCLUDED.stored_bytes;
    DELETE FROM execution_events WHERE execution_id IN (SELECT id FROM deleted);
    RETURN NULL;
END
$$;

-- What is stored already, in slot 0 (the triggers above hold back writes until this commits): one grouped pass
-- over each table, not a scan per organization (captures has no index led by the organization).
WITH bodies AS (
    SELECT organization_id, sum(body_size) AS bytes,
           count(*) FILTER (WHERE received_at >= date_trunc('day', now(), 'UTC')) AS today
    FROM captures GROUP BY organization_id
), results AS (
    SELECT e.organization_id, sum(octet_length(n.result::text)) AS bytes
    FROM node_results n JOIN executions e ON e.id = n.execution_id GROUP BY e.organization_id
)
INSERT INTO organization_usage (organization_id, slot, stored_bytes, day, captures)
SELECT o.id, 0, COALESCE(b.bytes, 0) + COALESCE(r.bytes, 0), (now() AT TIME ZONE 'UTC')::date, COALESCE(b.today, 0)
FROM organizations o
LEFT JOIN bodies b ON b.organization_id = o.id
LEFT JOIN results r ON r.organization_id = o.id;
