-- Collections: requests grouped in folders, imported from an OpenAPI description and kept in sync with it.

CREATE TABLE collections (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name            text NOT NULL,
    description     text,
    -- Values the requests' templates use (base_url from the description's first server); the lowest layer when a
    -- flow runs one of its requests.
    variables       jsonb NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, name)
);

CREATE TABLE collection_requests (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    collection_id   uuid NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    name            text NOT NULL,
    folder          text,
    method          text NOT NULL,
    url             text NOT NULL,
    headers         jsonb NOT NULL DEFAULT '{}',
    query           jsonb NOT NULL DEFAULT '{}',
    body            text,
    description     text,
    -- METHOD + normalized path of the OpenAPI operation it came from: the identity sync matches on.
    operation_key   text,
    deprecated      boolean NOT NULL DEFAULT false,
    -- The request as the last import or sync generated it: the base of the three-way merge that keeps a user's
    -- edits when the description changes.
    generated       jsonb,
    -- Fingerprints of the operation's parameters, body, responses, deprecation and summary at the last sync.
    fingerprints    jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (collection_id, operation_key)
);
CREATE INDEX collection_requests_order ON collection_requests (collection_id, id);

-- The OpenAPI source a collection follows.
CREATE TABLE collection_syncs (
    collection_id   uuid PRIMARY KEY REFERENCES collections (id) ON DELETE CASCADE,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    source          jsonb NOT NULL,
    delete_removed  boolean NOT NULL DEFAULT false,
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'synced', 'failed')),
    last_error      text,
    last_synced_at  timestamptz,
    document_sha256 text
);

-- Every applied sync (and the import), with the description's SHA-256.
CREATE TABLE collection_sync_runs (
    id              uuid PRIMARY KEY,
    collection_id   uuid NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    document_sha256 text NOT NULL,
    synced_at       timestamptz NOT NULL DEFAULT now(),
    added           integer NOT NULL,
    modified        integer NOT NULL,
    removed         integer NOT NULL,
    unchanged       integer NOT NULL
);
CREATE INDEX collection_sync_runs_recent ON collection_sync_runs (collection_id, synced_at DESC);
