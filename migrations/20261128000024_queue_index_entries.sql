-- Fewer index entries per execution on the queue's hot path (`hookflow-bench queue`: an execution wrote about two
-- dozen index entries between its launch and its end).
--
-- executions_running (id) WHERE status = 'running' served nothing executions_running_org (organization_id,
-- runner_id) WHERE status = 'running' does not: the lease sweep reads every running row either way, and the
-- per-runner and per-organization counts need the latter. Every claim wrote an entry into both.
DROP INDEX IF EXISTS executions_running;

-- A job's row changes once after its insert, when its execution ends (`completed_at`, in no index). With room left
-- on its page that update stays on the page (a HOT update) and writes no entry into the job's two indexes; pruning
-- then reclaims the old version without a vacuum. New pages are filled to half; existing ones are left as they are.
ALTER TABLE jobs SET (fillfactor = 50);
