-- A node result is stored once and only ever read whole (GET .../nodes): nothing queries into it. As json,
-- PostgreSQL checks its syntax and keeps the text; as jsonb it also built the binary form on every insert and
-- printed it back on every read (33 results of a request node per statement: 15 us per row as jsonb, 11 as json).
-- Rewrites node_results (an upgrade waits for it, as for any migration at start: about a sequential scan and a copy
-- of the table). A replica not yet upgraded still stores its results (jsonb is assigned to json by PostgreSQL's own
-- cast), but a connection of it that had already prepared the read of results fails it ("cached plan must not
-- change result type"): GET .../nodes answers 500 there until the connection is replaced.
ALTER TABLE node_results ALTER COLUMN result TYPE json USING result::json;
