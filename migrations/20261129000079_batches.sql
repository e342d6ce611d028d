-- Issue #52, part B: data-driven runs. A launch with rows makes one batch: every row an execution queued like any
-- other, carrying its batch and its row index (`iteration`, from 0); a rerun of a batch's failed rows is a new batch
-- whose executions keep their rows' iterations. The batch's counts are read from its executions (by the index
-- below), so finishing an execution writes nothing more. No foreign key from executions: the queue's inserts
-- would pay its check; a batch goes with its flow (and its executions with theirs) or its organization.
CREATE TABLE batches (
    id               uuid PRIMARY KEY,
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    -- Null for a batch of an inline definition (`POST /executions` with rows).
    flow_id          uuid REFERENCES flows (id) ON DELETE CASCADE,
    total            integer NOT NULL CHECK (total BETWEEN 0 AND 10000),
    -- The batch whose failed rows this one runs again.
    rerun_of         uuid REFERENCES batches (id) ON DELETE SET NULL,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX batches_flow ON batches (flow_id) WHERE flow_id IS NOT NULL;
CREATE INDEX batches_organization ON batches (organization_id, id);

ALTER TABLE executions
    ADD COLUMN batch_id   uuid,
    ADD COLUMN iteration  integer,
    ADD CONSTRAINT executions_batch_iteration CHECK ((batch_id IS NULL) = (iteration IS NULL) AND iteration >= 0);
CREATE INDEX executions_batch ON executions (batch_id, iteration) WHERE batch_id IS NOT NULL;
