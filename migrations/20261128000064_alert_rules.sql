-- Monitors (issue #50), alert rules: what no single run shows. `schedule_unclaimed`: the schedule's newest
-- execution still queued `after_s` after it was launched (no runner with its labels took it); `runners_offline`:
-- no runner of the organization carrying every one of `runner_labels` online for `after_s` (labels no runner has
-- ever carried count from the rule's creation). `state` is `ok` or `alerting`; the evaluator takes rules with `FOR
-- UPDATE SKIP LOCKED` and writes each change of state with its alert in one transaction (once across replicas).
CREATE TABLE alert_rules (
    id               uuid PRIMARY KEY,
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    kind             text NOT NULL CHECK (kind IN ('schedule_unclaimed', 'runners_offline')),
    schedule_id      uuid REFERENCES flow_schedules (id) ON DELETE CASCADE,
    runner_labels    text[] NOT NULL DEFAULT '{}',
    after_s          integer NOT NULL CHECK (after_s BETWEEN 30 AND 86400),
    channels         uuid[] NOT NULL,
    state            text NOT NULL DEFAULT 'ok' CHECK (state IN ('ok', 'alerting')),
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX alert_rules_organization ON alert_rules (organization_id, created_at, id);
