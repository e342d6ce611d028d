-- Monitors (issue #50), alerts: an organization's notification channels (email, Slack, signed webhook) and the
-- alerts sent to them.
--
-- A `webhook` channel's signing secret is sealed with the master key (like destinations'). `last_delivery` is the
-- outcome of the newest send: `{at, ok, error}`.
CREATE TABLE notification_channels (
    id                   uuid PRIMARY KEY,
    organization_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name                 text NOT NULL,
    kind                 text NOT NULL CHECK (kind IN ('email', 'slack', 'webhook')),
    address              text,
    url                  text,
    signing_secret       bytea,
    signing_nonce        bytea,
    signing_key_version  integer,
    last_delivery        jsonb,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notification_channels_organization ON notification_channels (organization_id, created_at, id);

-- One alert (or a channel's test send, `test`) and its channels. Written in the transaction that handles its
-- cause (a schedule transition, a rule's change, a test request), so each cause has its one row; the sender takes
-- rows without `outcome` with `FOR UPDATE SKIP LOCKED` and pushes `claimed_until` past its sends, so one replica
-- sends each (a crashed sender's row is taken again after the lease).
CREATE TABLE alerts (
    id               uuid PRIMARY KEY,
    -- The listing's order (newest first) and cursor.
    seq              bigint GENERATED ALWAYS AS IDENTITY,
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    type             text NOT NULL,
    test             boolean NOT NULL DEFAULT false,
    channel_ids      uuid[] NOT NULL,
    payload          jsonb NOT NULL,
    -- What the Slack and email texts add to the payload: the schedule's cron and zone.
    context          jsonb NOT NULL DEFAULT '{}',
    at               timestamptz NOT NULL DEFAULT now(),
    claimed_until    timestamptz,
    outcome          text CHECK (outcome IN ('sent', 'failed'))
);
CREATE INDEX alerts_organization ON alerts (organization_id, seq DESC) WHERE NOT test;
CREATE INDEX alerts_pending ON alerts (at) WHERE outcome IS NULL;
