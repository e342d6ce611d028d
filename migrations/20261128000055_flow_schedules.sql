-- Monitors (issue #50), schedules: several schedules per flow, each with its IANA time zone, environment, version,
-- variables, runner labels, overlap policy, catch-up window and pause; executions say which schedule launched
-- them; and each schedule's run state (passing, failing, unknown) with an outbox of its transitions.
--
-- `next_at` is the next occurrence not yet fired (NULL: none computed yet, or paused). Every replica's scheduler
-- takes due rows with `FOR UPDATE SKIP LOCKED` and moves `next_at` forward in the transaction that launches, so
-- one process fires each occurrence. The flow's legacy `schedule` text is mirrored as the row with `legacy` (at
-- most one per flow, UTC, the draft); its existing values become such rows here, keeping their next firing.
CREATE TABLE flow_schedules (
    id                     uuid PRIMARY KEY,
    organization_id        uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    flow_id                uuid NOT NULL REFERENCES flows (id) ON DELETE CASCADE,
    legacy                 boolean NOT NULL DEFAULT false,
    cron                   text NOT NULL,
    timezone               text NOT NULL DEFAULT 'UTC',
    environment            text,
    -- null (the draft), "latest" or a version number, as the API takes it.
    version                jsonb NOT NULL DEFAULT 'null',
    variables              jsonb NOT NULL DEFAULT '{}',
    runner_labels          text[] NOT NULL DEFAULT '{}',
    overlap                text NOT NULL DEFAULT 'skip' CHECK (overlap IN ('skip', 'allow')),
    catch_up_s             integer NOT NULL DEFAULT 0 CHECK (catch_up_s BETWEEN 0 AND 86400),
    paused                 boolean NOT NULL DEFAULT false,
    notify_channels        uuid[] NOT NULL DEFAULT '{}',
    notify_after_failures  integer NOT NULL DEFAULT 1 CHECK (notify_after_failures BETWEEN 1 AND 100),
    notify_on_recovery     boolean NOT NULL DEFAULT true,
    state                  text NOT NULL DEFAULT 'unknown' CHECK (state IN ('unknown', 'passing', 'failing')),
    -- Consecutive failed runs (reset by a successful one).
    failed_runs            integer NOT NULL DEFAULT 0,
    next_at                timestamptz,
    -- The newest execution this schedule launched (overlap: skip looks at it).
    last_execution_id      uuid,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX flow_schedules_flow ON flow_schedules (flow_id, created_at, id);
CREATE UNIQUE INDEX flow_schedules_legacy ON flow_schedules (flow_id) WHERE legacy;
CREATE INDEX flow_schedules_due ON flow_schedules (next_at) WHERE NOT paused;

INSERT INTO flow_schedules (id, organization_id, flow_id, legacy, cron, next_at)
SELECT gen_random_uuid(), organization_id, id, true, schedule, schedule_next_at FROM flows WHERE schedule IS NOT NULL;

-- The schedule that launched an execution (no foreign key: executions are written hot, and a deleted schedule's
-- runs keep its id).
ALTER TABLE executions ADD COLUMN schedule_id uuid;

-- One row per change of a schedule's state (to `failing` after `notify_after_failures` consecutive failed runs;
-- back to `passing` from `failing`), written by the trigger below in the transaction that records the execution's
-- end. The row lock on the schedule orders concurrent ends, so each transition exists once whichever replica
-- recorded the end. `handled_at` is for the alert sender, which acts on each row once.
CREATE TABLE schedule_transitions (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    schedule_id      uuid NOT NULL REFERENCES flow_schedules (id) ON DELETE CASCADE,
    flow_id          uuid NOT NULL,
    execution_id     uuid NOT NULL,
    to_state         text NOT NULL CHECK (to_state IN ('failing', 'passing')),
    -- Consecutive failed runs: the streak so far (`failing`) or the streak this recovery ends (`passing`).
    failed_runs      integer NOT NULL,
    at               timestamptz NOT NULL DEFAULT now(),
    handled_at       timestamptz
);
CREATE INDEX schedule_transitions_pending ON schedule_transitions (id) WHERE handled_at IS NULL;
CREATE INDEX schedule_transitions_schedule ON schedule_transitions (schedule_id, id);

-- A scheduled execution that ends succeeded counts as passing, failed or error as failing; cancelled counts as
-- neither. `unknown` counts as passing (a first run that fails is a transition). Ends are recorded in batches (one
-- statement ends many executions, whose row triggers then run in row order), so two batches could lock two
-- schedules in opposite orders: a transaction-scoped advisory lock taken before any schedule row makes those
-- updates one at a time (held until the batch commits; only batches holding scheduled executions take it).
CREATE FUNCTION schedule_execution_ended() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s flow_schedules%ROWTYPE;
BEGIN
    PERFORM pg_advisory_xact_lock(7305050055);
    SELECT * INTO s FROM flow_schedules WHERE id = NEW.schedule_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF NEW.status = 'succeeded' THEN
        IF s.state = 'failing' THEN
            INSERT INTO schedule_transitions (organization_id, schedule_id, flow_id, execution_id, to_state, failed_runs)
            VALUES (s.organization_id, s.id, s.flow_id, NEW.id, 'passing', s.failed_runs);
        END IF;
        UPDATE flow_schedules SET state = 'passing', failed_runs = 0 WHERE id = s.id;
    ELSE
        s.failed_runs := s.failed_runs + 1;
        IF s.state <> 'failing' AND s.failed_runs >= s.notify_after_failures THEN
            INSERT INTO schedule_transitions (organization_id, schedule_id, flow_id, execution_id, to_state, failed_runs)
            VALUES (s.organization_id, s.id, s.flow_id, NEW.id, 'failing', s.failed_runs);
            s.state := 'failing';
        END IF;
        UPDATE flow_schedules SET state = s.state, failed_runs = s.failed_runs WHERE id = s.id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER executions_schedule_ended AFTER UPDATE OF status ON executions FOR EACH ROW
    WHEN (NEW.schedule_id IS NOT NULL AND OLD.status IN ('queued', 'running')
          AND NEW.status IN ('succeeded', 'failed', 'error'))
    EXECUTE FUNCTION schedule_execution_ended();
