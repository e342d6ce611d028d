-- Executions and their queue, the jobs runners claim, node results, stream events, runners, idempotency keys
-- and schedule bookkeeping.

-- A registered runner. organization_id NULL marks the server's own embedded runner, which serves every
-- organization.
CREATE TABLE runners (
    id               uuid PRIMARY KEY,
    organization_id  uuid REFERENCES organizations (id) ON DELETE CASCADE,
    name             text NOT NULL,
    labels           text[] NOT NULL DEFAULT '{}',
    version          text NOT NULL,
    max_concurrency  integer NOT NULL,
    host             jsonb NOT NULL,
    metrics          jsonb,
    running_jobs     integer NOT NULL DEFAULT 0,
    registered_at    timestamptz NOT NULL DEFAULT now(),
    last_seen_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX runners_org ON runners (organization_id, id);

-- One row per launch. The definition (and the published versions its module nodes run) are snapshotted at
-- launch, so an execution runs what was launched whatever happens to the flow afterwards.
CREATE TABLE executions (
    id                uuid PRIMARY KEY,
    organization_id   uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    flow_id           uuid NOT NULL REFERENCES flows (id) ON DELETE CASCADE,
    flow_name         text NOT NULL,
    flow_version      integer,
    draft_revision    integer NOT NULL,
    definition        jsonb NOT NULL,
    modules           jsonb NOT NULL DEFAULT '{}',
    environment       text,
    -- Launch variables over environment variables over organization variables (secret references unresolved).
    variables         jsonb NOT NULL DEFAULT '{}',
    runner_labels     text[] NOT NULL DEFAULT '{}',
    -- Top-level node ids in order: positions of results and the next node to announce.
    node_ids          text[] NOT NULL,
    status            text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'error')),
    trigger           text NOT NULL CHECK (trigger IN ('api', 'cli', 'schedule', 'tag')),
    attempt           integer NOT NULL DEFAULT 1,
    max_attempts      integer NOT NULL DEFAULT 3,
    runner_id         uuid,
    -- The job (claim) of the current attempt.
    job_id            uuid,
    lease_expires_at  timestamptz,
    cancel_requested  boolean NOT NULL DEFAULT false,
    timeout_s         integer NOT NULL,
    summary           jsonb,
    error             text,
    -- Events appended so far (the stream's event ids are 1..event_count).
    event_count       integer NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz
) WITH (
    -- Room on each page for HOT updates (leases, event counts change often and touch no indexed column), and
    -- frequent vacuuming so the queue index does not fill with entries of rows that left the queue.
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 200,
    autovacuum_vacuum_cost_delay = 0
);
-- The queue: only queued rows are indexed, so claims stay fast however long the history.
CREATE INDEX executions_queued ON executions (organization_id, id) WHERE status = 'queued';
-- Running executions, for the rescuer; leases are deliberately not indexed so extending one stays a HOT update.
CREATE INDEX executions_running ON executions (id) WHERE status = 'running';
CREATE INDEX executions_flow ON executions (flow_id, id DESC);
CREATE INDEX executions_org_created ON executions (organization_id, created_at);

-- A claim: one per (execution, attempt). The job token is stored hashed; it dies when the job completes (401
-- afterwards) or when the execution moves on to another attempt (409).
CREATE TABLE jobs (
    id               uuid PRIMARY KEY,
    execution_id     uuid NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    organization_id  uuid NOT NULL,
    attempt          integer NOT NULL,
    runner_id        uuid,
    token_hash       bytea NOT NULL UNIQUE,
    completed_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX jobs_execution ON jobs (execution_id);

-- Per-node results, idempotent per (execution, attempt, node).
CREATE TABLE node_results (
    execution_id  uuid NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    attempt       integer NOT NULL,
    node_id       text NOT NULL,
    position      integer NOT NULL,
    status        text NOT NULL,
    result        jsonb NOT NULL,
    PRIMARY KEY (execution_id, attempt, node_id)
);

-- The execution stream: every event in order, so late subscribers get the replay.
CREATE TABLE execution_events (
    execution_id  uuid NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    seq           integer NOT NULL,
    data          text NOT NULL,
    PRIMARY KEY (execution_id, seq)
);

-- Idempotency-Key of launch operations, scoped to organization + operation, kept 24 hours.
CREATE TABLE idempotency_keys (
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    operation        text NOT NULL,
    key              text NOT NULL,
    request_hash     bytea NOT NULL,
    response         jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, operation, key)
);

-- The next firing of a scheduled flow; NULL until the scheduler first sees the schedule (any write of the
-- schedule resets it). Claimed with SKIP LOCKED so one process fires each occurrence.
ALTER TABLE flows ADD COLUMN schedule_next_at timestamptz;
CREATE INDEX flows_scheduled ON flows (schedule_next_at) WHERE schedule IS NOT NULL;

-- A flow's last status is read from its newest execution: writing it to the flow row would make every launch
-- and completion of one flow queue on that row's lock.
ALTER TABLE flows DROP COLUMN last_status;

-- Organizations served least recently come first when a runner serves several (the embedded runner).
ALTER TABLE organizations ADD COLUMN last_claim_at timestamptz;
