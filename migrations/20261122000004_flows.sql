-- Flows: the draft definition, immutable published versions, and keyed environments.

CREATE TABLE flows (
    id               uuid PRIMARY KEY,
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    description      text,
    tags             text[] NOT NULL DEFAULT '{}',
    -- The draft, stored as given (validated on write).
    definition       jsonb NOT NULL,
    schedule         text,
    -- Bumped by every change of the draft.
    draft_revision   integer NOT NULL DEFAULT 1,
    -- Status of the newest execution (maintained by the execution work).
    last_status      text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, name)
);
CREATE INDEX flows_org_id ON flows (organization_id, id DESC);
CREATE INDEX flows_tags ON flows USING gin (tags);

-- A published version never changes: there is no UPDATE of this table anywhere.
CREATE TABLE flow_versions (
    id               uuid PRIMARY KEY,
    flow_id          uuid NOT NULL REFERENCES flows (id) ON DELETE CASCADE,
    organization_id  uuid NOT NULL,
    version          integer NOT NULL,
    note             text,
    definition       jsonb NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (flow_id, version)
);

CREATE TABLE flow_environments (
    flow_id          uuid NOT NULL REFERENCES flows (id) ON DELETE CASCADE,
    organization_id  uuid NOT NULL,
    key              text NOT NULL,
    variables        jsonb NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (flow_id, key)
);
