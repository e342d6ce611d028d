-- Recording an attempt no longer checks its delivery row by a foreign key (issue #49's throughput): the check cost
-- every attempt an index probe and a row lock written on the delivery it had just updated. Attempts are written
-- only by the statement that updates their delivery (`recording`), in the same statement, so they always have one;
-- deleting deliveries deletes their attempts once per statement (a transition table), not a trigger per row.
ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_delivery_id_fkey;

CREATE FUNCTION delivery_attempts_follow_deletes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- An array, not a join: the plan PL/pgSQL keeps for the session is an index scan whatever the first size.
    DELETE FROM delivery_attempts WHERE delivery_id = ANY (ARRAY(SELECT id FROM gone));
    RETURN NULL;
END $$;
CREATE TRIGGER deliveries_attempts_follow AFTER DELETE ON deliveries
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION delivery_attempts_follow_deletes();
