-- Deliveries that cannot be sent stay out of the due scans (review of issue #49): `by_runner` says who sends a
-- row (a destination with `runner_labels`: a runner of its organization), so the server's claim walks only its own
-- rows and a runner's poll only its organization's; both indexes lead with the organization, so a claim takes
-- organizations in turn (round-robin). A disabled destination's pending rows wait at 'infinity' (never due) and
-- are due again at once when it is enabled; the trigger keeps both columns following their destination.
ALTER TABLE deliveries ADD COLUMN by_runner boolean NOT NULL DEFAULT false;
-- Each claim's lease: a runner's result is taken only with the lease its delivery was handed out with.
ALTER TABLE deliveries ADD COLUMN lease uuid;
UPDATE deliveries d SET by_runner = true
FROM destinations t WHERE t.id = d.destination_id AND cardinality(t.runner_labels) > 0 AND d.status = 'pending';
UPDATE deliveries d SET next_attempt_at = 'infinity'
FROM destinations t WHERE t.id = d.destination_id AND NOT t.enabled AND d.status = 'pending';
DROP INDEX deliveries_due;
CREATE INDEX deliveries_due_server ON deliveries (organization_id, next_attempt_at)
    WHERE status = 'pending' AND NOT by_runner;
CREATE INDEX deliveries_due_runner ON deliveries (organization_id, next_attempt_at)
    WHERE status = 'pending' AND by_runner;

CREATE FUNCTION destination_deliveries_follow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.enabled IS DISTINCT FROM OLD.enabled OR NEW.runner_labels IS DISTINCT FROM OLD.runner_labels THEN
        UPDATE deliveries SET by_runner = cardinality(NEW.runner_labels) > 0,
            next_attempt_at = CASE WHEN NOT NEW.enabled THEN 'infinity'::timestamptz
                                   WHEN next_attempt_at = 'infinity' THEN now()
                                   ELSE next_attempt_at END
        WHERE destination_id = NEW.id AND status = 'pending';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER destinations_deliveries_follow AFTER UPDATE OF enabled, runner_labels ON destinations
    FOR EACH ROW EXECUTE FUNCTION destination_deliveries_follow();
