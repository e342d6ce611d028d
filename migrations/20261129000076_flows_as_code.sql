-- Issue #52, part A (flows as code): a flow may carry a `key` (unique in its organization) by which a folder of
-- flow files names it, and `managed` marks the flows `hookflow apply` made or took over; an execution may run an
-- inline definition sent by `POST /executions`, without any stored flow: its `flow_id` is then NULL and `source`
-- says where the definition came from ({path, definition_sha256, git_commit, git_ref}); NULL for a stored flow's.
-- Dropping NOT NULL and adding nullable columns rewrite nothing; the new index is built once over `executions`.
ALTER TABLE flows
    ADD COLUMN key     text CHECK (key ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
    ADD COLUMN managed boolean NOT NULL DEFAULT false;
CREATE UNIQUE INDEX flows_key ON flows (organization_id, key) WHERE key IS NOT NULL;

ALTER TABLE executions ALTER COLUMN flow_id DROP NOT NULL;
ALTER TABLE executions ADD COLUMN source jsonb;

-- `GET /executions`: an organization's executions newest first (ids are time-ordered).
CREATE INDEX executions_org_id ON executions (organization_id, id DESC);
