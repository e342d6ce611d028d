-- The launches captures owe hold a reference to their trigger instead of a copy of its JSON (issue #47): the
-- endpoint and the trigger's index, as before, and the SHA-256 of the trigger's JSON text as it was when the
-- capture arrived. The dispatcher reads the trigger from its endpoint and launches only when it still hashes the
-- same (a trigger changed or removed meanwhile launches nothing), so a capture no longer copies up to ten
-- triggers' JSON into the outbox.
--
-- Expand first: `trigger` stays, nullable, so a server of the previous release keeps capturing (it still writes
-- the copy, which this release's dispatcher reads when present); rows this release writes leave it NULL, which the
-- previous release's dispatcher cannot read (its pass fails and leaves the rows to this release's dispatchers).
-- The column is dropped by a later release. Catalog changes only, and one index on a table whose rows live
-- seconds.
ALTER TABLE trigger_launches ALTER COLUMN trigger DROP NOT NULL;
ALTER TABLE trigger_launches ADD COLUMN trigger_sha256 bytea;
-- Owed launches are taken organization by organization, round-robin: the next organization with owed launches,
-- and its oldest.
CREATE INDEX trigger_launches_organization ON trigger_launches (organization_id, capture_id, trigger_index);
