-- Priority of a schedule's executions (issue #53): 1 (highest) to 5, 3 unless set.
ALTER TABLE flow_schedules ADD COLUMN priority smallint NOT NULL DEFAULT 3 CHECK (priority BETWEEN 1 AND 5);
