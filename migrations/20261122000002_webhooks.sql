-- Webhook capture: endpoints, captured requests and per-minute counters for analytics.

-- Endpoint ids are random (v4): they are public capture URLs.
CREATE TABLE webhooks (
    id               uuid PRIMARY KEY,
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    description      text,
    -- NULL: the organization's default applies.
    max_body_bytes   bigint CHECK (max_body_bytes BETWEEN 1 AND 10485760),
    max_age_days     integer CHECK (max_age_days > 0),
    max_requests     bigint CHECK (max_requests > 0),
    -- Custom answer {status, headers, body} instead of the JSON receipt.
    response         jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_org_created ON webhooks (organization_id, created_at DESC, id DESC);

-- Captured requests. Ids are UUIDv7 assigned by the single capture writer of a server in commit order, so they
-- double as stream event ids: "after id X" is exactly what a reconnecting subscriber missed.
CREATE TABLE captures (
    id               uuid PRIMARY KEY,
    organization_id  uuid NOT NULL,
    webhook_id       uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    method           text NOT NULL,
    path             text NOT NULL,
    query_string     text NOT NULL,
    -- {"name": ["value", ...]} parsed from query_string.
    query            jsonb NOT NULL,
    -- [["Name", "value"], ...] in received order, case kept, duplicates kept.
    headers          jsonb NOT NULL,
    content_type     text,
    body             bytea NOT NULL,
    body_size        integer NOT NULL,
    body_sha256      bytea NOT NULL,
    -- Whether the body is valid UTF-8 (then shown as text, else base64), known even when a list leaves it out.
    body_utf8        boolean NOT NULL,
    source_ip        text NOT NULL,
    received_at      timestamptz NOT NULL
);
CREATE INDEX captures_webhook_id ON captures (webhook_id, id DESC);
CREATE INDEX captures_webhook_received ON captures (webhook_id, received_at DESC, id DESC);

-- Counters are sharded by writer slot: the capture writer keeps several batches in flight, each bumping only its
-- own slot's rows, so concurrent batches never wait on each other's row locks. Readers sum the slots.

-- Captures currently stored per endpoint (the request_count of an endpoint is the sum over slots; deletions and
-- retention subtract in slot 0) and the newest receipt.
CREATE TABLE webhook_counters (
    webhook_id       uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    slot             smallint NOT NULL,
    stored           bigint NOT NULL DEFAULT 0,
    last_request_at  timestamptz,
    PRIMARY KEY (webhook_id, slot)
);

-- Captures per endpoint, minute and method, bumped by the writer in the same transaction as the rows: analytics
-- read these, never the captures. They count what was received; deleting history does not rewrite the past.
CREATE TABLE capture_counts (
    webhook_id       uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    organization_id  uuid NOT NULL,
    minute           timestamptz NOT NULL,
    method           text NOT NULL,
    slot             smallint NOT NULL DEFAULT 0,
    count            bigint NOT NULL,
    PRIMARY KEY (webhook_id, minute, method, slot)
);
CREATE INDEX capture_counts_org_minute ON capture_counts (organization_id, minute);

-- The body as JSON when it is JSON, else NULL: lets search evaluate JSONPath over bodies of any kind.
CREATE FUNCTION hookflow_try_jsonb(body bytea) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN convert_from(body, 'UTF8')::jsonb;
EXCEPTION WHEN others THEN
    RETURN NULL;
END;
$$;
