-- Priority (issue #53): a launch may set 1 (highest) to 5; claims take the highest priority first, then the
-- oldest. The queue's index leads with the organization (the embedded runner's loose scan from one organization
-- to the next still walks it), then priority and id, so a claim within an organization reads its rows in claim
-- order without sorting.
ALTER TABLE executions ADD COLUMN priority smallint NOT NULL DEFAULT 3 CHECK (priority BETWEEN 1 AND 5);
DROP INDEX executions_queued;
CREATE INDEX executions_queued ON executions (organization_id, priority, id) WHERE status = 'queued';

-- Runner pools' backlog: queued executions grouped by their label sets (one row per distinct set of an
-- organization), counted and aged from this index alone.
CREATE INDEX executions_queued_labels ON executions (organization_id, runner_labels, created_at)
    WHERE status = 'queued';
