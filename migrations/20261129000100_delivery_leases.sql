-- A claim's lease no longer moves `next_attempt_at` (issue #49's throughput): it is kept in `leased_until`, a column
-- no index names, so leasing a delivery is a heap-only update (no index entry written) where its page has room;
-- the pages keep a fifth free for it. The due scans skip leased rows (a few per sender in flight).
ALTER TABLE deliveries ADD COLUMN leased_until timestamptz;
ALTER TABLE deliveries SET (fillfactor = 80);
