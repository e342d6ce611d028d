-- Fair shares and bounded tenants: the embedded runner counts what each organization holds of its slots, its
-- claim is driven by queued work (never by the organizations table), and organizations remember who made them.

-- Running executions by organization and runner: the embedded runner's claim counts an organization's share of
-- its slots with this index. Leases stay unindexed, so extending one is still a HOT update.
CREATE INDEX executions_running_org ON executions (organization_id, runner_id) WHERE status = 'running';

-- The person who made an organization (NULL for the operator's and the first start's), counted against
-- --max-organizations-per-person.
ALTER TABLE organizations ADD COLUMN created_by_user uuid REFERENCES users (id) ON DELETE SET NULL;
CREATE INDEX organizations_created_by_user ON organizations (created_by_user) WHERE created_by_user IS NOT NULL;
