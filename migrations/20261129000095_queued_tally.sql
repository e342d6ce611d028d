-- Runner pools' backlog without counting the queue (issue #53): every change of what is queued adds a row of
-- +n/-n per (organization, label set) here, written by triggers in the changing statement's own transaction (so
-- a reader's snapshot sees the tally and the executions agree). Writers only ever insert, so concurrent launches
-- and claims never wait on each other here; readers sum an organization's rows, and `pools::compact` folds them
-- back into one row per label set (a DELETE ... RETURNING feeding an INSERT, one statement). No foreign key: an
-- organization's deletion cascades to its executions, whose triggers then write the -n that zero its tally.
CREATE TABLE executions_queued_tally (
    organization_id uuid NOT NULL,
    runner_labels text[] NOT NULL,
    delta bigint NOT NULL
);
CREATE INDEX executions_queued_tally_org ON executions_queued_tally (organization_id, runner_labels);

-- No launch or claim of a replica still running may slip between the count and the triggers.
LOCK TABLE executions IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO executions_queued_tally (organization_id, runner_labels, delta)
    SELECT organization_id, runner_labels, count(*) FROM executions WHERE status = 'queued'
    GROUP BY organization_id, runner_labels;

-- Inserts and deletes: one row per statement and label set (a batch of 10,000 rows writes a handful).
CREATE FUNCTION executions_queued_tally_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO executions_queued_tally (organization_id, runner_labels, delta)
        SELECT organization_id, runner_labels, count(*) FROM executions_added WHERE status = 'queued'
        GROUP BY organization_id, runner_labels;
    RETURN NULL;
END $$;
CREATE FUNCTION executions_queued_tally_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO executions_queued_tally (organization_id, runner_labels, delta)
        SELECT organization_id, runner_labels, -count(*) FROM executions_removed WHERE status = 'queued'
        GROUP BY organization_id, runner_labels;
    RETURN NULL;
END $$;
CREATE TRIGGER executions_queued_tally_insert AFTER INSERT ON executions
    REFERENCING NEW TABLE AS executions_added FOR EACH STATEMENT EXECUTE FUNCTION executions_queued_tally_added();
CREATE TRIGGER executions_queued_tally_delete AFTER DELETE ON executions
    REFERENCING OLD TABLE AS executions_removed FOR EACH STATEMENT EXECUTE FUNCTION executions_queued_tally_removed();

-- Updates: only rows entering or leaving `queued` (or changing organization or labels while queued) fire.
CREATE FUNCTION executions_queued_tally_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = 'queued' THEN
        INSERT INTO executions_queued_tally (organization_id, runner_labels, delta)
            VALUES (OLD.organization_id, OLD.runner_labels, -1);
    END IF;
    IF NEW.status = 'queued' THEN
        INSERT INTO executions_queued_tally (organization_id, runner_labels, delta)
            VALUES (NEW.organization_id, NEW.runner_labels, 1);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER executions_queued_tally_update AFTER UPDATE ON executions FOR EACH ROW
    WHEN ((OLD.status = 'queued' OR NEW.status = 'queued')
          AND (OLD.status IS DISTINCT FROM NEW.status OR OLD.organization_id IS DISTINCT FROM NEW.organization_id
               OR OLD.runner_labels IS DISTINCT FROM NEW.runner_labels))
    EXECUTE FUNCTION executions_queued_tally_moved();
