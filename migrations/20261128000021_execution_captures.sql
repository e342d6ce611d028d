-- Captures sent to an execution's own capture URL ({{execution.capture_url}}, issue "Webhooks inside flows")
-- belong to that execution and to no endpoint: `webhook_id` is NULL for them and `execution_id` names the
-- execution, whose deletion (directly, through its flow or organization, or by retention) deletes them.
-- Dropping NOT NULL and adding a nullable column change only the catalog. The partial index holds execution
-- captures only, but building it reads the whole table once: on a large captures table this migration takes as
-- long as a sequential scan of it (captures wait for it, as for any migration at start).
ALTER TABLE captures ALTER COLUMN webhook_id DROP NOT NULL;
ALTER TABLE captures ADD COLUMN execution_id uuid REFERENCES executions (id) ON DELETE CASCADE;
-- Every capture has exactly one owner. Existing rows all have an endpoint, so the check is not re-read over them.
ALTER TABLE captures ADD CONSTRAINT captures_one_owner
    CHECK ((webhook_id IS NULL) <> (execution_id IS NULL)) NOT VALID;
CREATE INDEX captures_execution ON captures (execution_id, id) WHERE execution_id IS NOT NULL;
