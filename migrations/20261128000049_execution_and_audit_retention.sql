-- Operating II: how long an organization keeps its finished executions (with their node results, events, jobs and
-- captures) and its audit entries, set by an operator (`hookflow-server orgs limits`); NULL takes the server's
-- default (`--default-execution-retention-days`, `--default-audit-retention-days`), itself none unless set. Audit
-- entries are kept at least `--min-audit-retention-days` whatever either says.
--
-- Only adds: two nullable columns and a partial index of finished executions by organization and end, built
-- with one read of `executions` while writes to it wait (seconds on a large history). Older replicas keep working.
ALTER TABLE organizations
    ADD COLUMN execution_retention_days integer CHECK (execution_retention_days > 0),
    ADD COLUMN audit_retention_days integer CHECK (audit_retention_days > 0);

CREATE INDEX executions_finished_by_org ON executions (organization_id, finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX audit_log_org_created ON audit_log (organization_id, created_at);
