-- Event streams open on each execution (on any replica). A transition NOTIFYs only while a stream watches its
-- execution: a NOTIFY takes a cluster-wide lock at commit, which serialized the queue's transitions, and most
-- executions are never watched. Streams count themselves in with an UPDATE of the row, so they serialize with the
-- transitions' own UPDATE of it (see control-plane/src/queue/events.rs).
ALTER TABLE executions ADD COLUMN watchers integer NOT NULL DEFAULT 0 CHECK (watchers >= 0);
