-- Replicas with long polls waiting, per organization (the nil id: polls of runners serving every organization).
-- A launch NOTIFYs only when another replica has polls waiting for its organization: a NOTIFY takes a
-- cluster-wide lock at commit, and the replica that launched wakes its own polls in memory. Replicas refresh
-- their watches while polls wait; a watch stops counting two minutes after its last refresh, and retention
-- removes it.
CREATE TABLE queue_watchers (
    organization_id uuid NOT NULL,
    replica         uuid NOT NULL,
    seen_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, replica)
);
