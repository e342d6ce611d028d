-- Captures that start flows: an endpoint's triggers; the launches its captures owe, written by the capture batch's
-- own statement (an outbox: a capture and what it owes commit together, so a crash after the sender's answer loses
-- no launch); the capture a triggered execution came from and how deep in a chain of triggered runs it is; and the
-- per-minute counts that hold an organization's trigger launches to the server's limit on every replica.

-- [{flow_id, q?, filter?, environment?, version?, variables?, extract?}], at most 10 (checked on write).
ALTER TABLE webhooks ADD COLUMN triggers jsonb NOT NULL DEFAULT '[]';

-- A launch a capture owes: one row per (capture, trigger), holding the trigger as it was when the capture arrived.
-- Dispatchers take rows with FOR UPDATE SKIP LOCKED and delete each in the transaction that launches its flow (or
-- decides it launches nothing), so each is acted on once whichever replica takes it, and a row left by a crash is
-- taken by the next sweep. No foreign keys: the capture batch would pay their checks, and deleting captures a
-- cascade per row; a row whose capture is gone by its turn is deleted then. Rows live seconds: the table stays
-- small, vacuumed often.
CREATE TABLE trigger_launches (
    capture_id       uuid NOT NULL,
    trigger_index    smallint NOT NULL,
    organization_id  uuid NOT NULL,
    webhook_id       uuid NOT NULL,
    trigger          jsonb NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (capture_id, trigger_index)
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 200);

-- What launched an execution when a capture did, and its depth in a chain of triggered runs (0: no capture
-- launched it). New columns with constant defaults: no rewrite of the table.
ALTER TABLE executions
    ADD COLUMN trigger_webhook_id uuid,
    ADD COLUMN trigger_request_id uuid,
    ADD COLUMN trigger_depth integer NOT NULL DEFAULT 0 CHECK (trigger_depth >= 0);

-- `webhook` joins the triggers. The old rows all meet the narrower check they were written under, so the wider one
-- is not validated against them (NOT VALID: no scan of the table under its lock); new rows are checked.
ALTER TABLE executions DROP CONSTRAINT executions_trigger_check;
ALTER TABLE executions ADD CONSTRAINT executions_trigger_check
    CHECK (trigger IN ('api', 'cli', 'schedule', 'tag', 'webhook')) NOT VALID;

-- A capture's executions (its `executions` in reads). Partial: executions no capture launched are not in it, so
-- launches and claims of the others never touch it. Building it reads the table once (writes to it wait).
CREATE INDEX executions_trigger_request ON executions (trigger_request_id) WHERE trigger_request_id IS NOT NULL;

-- Trigger launches per organization and minute (every replica's dispatcher counts here, under the row's lock).
-- Rows older than an hour are removed by retention.
CREATE TABLE trigger_minutes (
    organization_id  uuid NOT NULL,
    minute           timestamptz NOT NULL,
    launched         integer NOT NULL DEFAULT 0,
    PRIMARY KEY (organization_id, minute)
);

-- Refused trigger launches per endpoint, reason and minute: the first of each writes the audit entry, so a flood
-- refused by the limit (or a loop stopped at its depth) writes one entry a minute, not one per capture. Rows older
-- than an hour are removed by retention.
CREATE TABLE trigger_refusals (
    webhook_id       uuid NOT NULL,
    reason           text NOT NULL,
    minute           timestamptz NOT NULL,
    refused          integer NOT NULL DEFAULT 1,
    PRIMARY KEY (webhook_id, reason, minute)
);
