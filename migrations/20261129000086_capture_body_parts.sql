-- Issue #51, bodies over 1 MiB: the capture path writes such a body here in parts of 1 MiB (each part copied once,
-- from the one buffer the request's body was read into) before its capture is queued; the capture writer's batch
-- assembles the parts into `captures.body` and deletes them in the same statement. UNLOGGED: the parts are read only
-- by the primary, in the statement that stores the capture (which is logged whole); after a crash they are gone
-- with the captures that were never answered. Parts left by a capture that was never stored are swept after an hour.
CREATE UNLOGGED TABLE capture_body_parts (
    upload_id  uuid NOT NULL,
    seq        integer NOT NULL,
    data       bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (upload_id, seq)
);
CREATE INDEX capture_body_parts_age ON capture_body_parts (created_at);
