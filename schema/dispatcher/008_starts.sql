-- exec-dispatcher store schema, step 8: what the dispatcher knows of starts
-- (doc/protocol.md, "Start notices and the start count").
--
-- An executor counts every start it commits and tells the dispatcher, on
-- its heartbeats, the count and the runs started since the last one it
-- told.  The dispatcher never re-queues a run it knows started (a notice
-- or any report attempt, even a refused one), and it remembers the highest
-- count each executor has shown: a state showing a lower one, or saying it
-- is a restored backup, is an older copy, whose "never started" proves
-- nothing.  The runs such a state's earlier sessions still held become an
-- explicit unknown, never re-queued on their own (invariant 7).

CREATE TABLE IF NOT EXISTS executor_starts(
	executor_id TEXT PRIMARY KEY,
	starts INTEGER NOT NULL CHECK(starts >= 0),   -- the highest count it showed
	seen_ms INTEGER NOT NULL);
CREATE TRIGGER IF NOT EXISTS executor_starts_up BEFORE UPDATE OF starts ON executor_starts
	WHEN new.starts < old.starts
BEGIN SELECT RAISE(ABORT, 'an executor''s start count never goes down'); END;

CREATE TABLE IF NOT EXISTS run_starts(
	run_id TEXT PRIMARY KEY REFERENCES runs(run_id),
	session_id TEXT NOT NULL,
	noticed_ms INTEGER NOT NULL);

-- Runs whose fate no evidence can decide: kept, shown, never re-queued.
CREATE TABLE IF NOT EXISTS run_unknowns(
	run_id TEXT PRIMARY KEY REFERENCES runs(run_id),
	why TEXT NOT NULL,
	at_ms INTEGER NOT NULL);

-- Each restored state recognised, for the operator.
CREATE TABLE IF NOT EXISTS restores(
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	executor_id TEXT NOT NULL, session_id TEXT NOT NULL,
	starts INTEGER NOT NULL, seen INTEGER NOT NULL, backup INTEGER NOT NULL,
	runs_unknown INTEGER NOT NULL, at_ms INTEGER NOT NULL);
