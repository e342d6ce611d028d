-- Destinations (issue #49): where an endpoint's captures are delivered, the deliveries each capture owes them
-- (written by the capture batch's own statement, before the sender is answered: an acknowledged capture always
-- has its deliveries) and every attempt made.

-- An endpoint's destinations (at most 10, checked on write). `next_slot_at` is the rate limit's shared clock: each
-- attempt of a rate-limited destination takes the next slot, advanced atomically by 1/rate, on every replica.
-- `failing_since`: when the first of an unbroken run of failed attempts ended (NULL: the last attempt delivered).
CREATE TABLE destinations (
    id                       uuid PRIMARY KEY,
    organization_id          uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    webhook_id               uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    name                     text NOT NULL,
    url                      text NOT NULL,
    q                        text,
    filter                   jsonb,
    runner_labels            text[] NOT NULL DEFAULT '{}',
    retry_schedule_s         integer[] NOT NULL,
    timeout_ms               integer NOT NULL,
    rate_limit_per_s         integer,
    disable_after_failing_s  integer NOT NULL,
    signing                  text CHECK (signing IN ('standard-webhooks')),
    signing_secret           bytea,
    signing_nonce            bytea,
    signing_key_version      integer,
    enabled                  boolean NOT NULL DEFAULT true,
    disabled_reason          text,
    failing_since            timestamptz,
    next_slot_at             timestamptz NOT NULL DEFAULT now(),
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX destinations_webhook ON destinations (webhook_id);
CREATE INDEX destinations_organization ON destinations (organization_id, webhook_id, created_at);

-- A delivery a capture owes a destination. `matched` NULL: the destination has `q`/`filter` and the sender has
-- not matched the capture yet (a capture that does not match loses the row). `round_start`: the attempts made
-- before the last replay (the schedule counts from there). Pending rows are claimed by pushing `next_attempt_at`
-- past the attempt's lease, so a crashed sender's row is taken again (at least once). No foreign key to the
-- capture: the batch would pay its check; a delivery whose capture is gone by its turn is cancelled then.
CREATE TABLE deliveries (
    id               uuid PRIMARY KEY,
    organization_id  uuid NOT NULL,
    destination_id   uuid NOT NULL REFERENCES destinations (id) ON DELETE CASCADE,
    webhook_id       uuid NOT NULL,
    capture_id       uuid NOT NULL,
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'delivered', 'dead', 'cancelled')),
    matched          boolean,
    attempts         integer NOT NULL DEFAULT 0,
    round_start      integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_attempt     jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz
) WITH (autovacuum_vacuum_scale_factor = 0.02);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_destination ON deliveries (destination_id, created_at DESC, id DESC);
CREATE INDEX deliveries_capture ON deliveries (capture_id);

-- Every attempt of a delivery, numbered from 1.
CREATE TABLE delivery_attempts (
    delivery_id  uuid NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    attempt      integer NOT NULL,
    at           timestamptz NOT NULL,
    status_code  integer,
    error        text,
    duration_ms  integer NOT NULL,
    runner_id    uuid,
    PRIMARY KEY (delivery_id, attempt)
);
