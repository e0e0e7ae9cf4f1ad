-- execkit state schema, step 8: runs handed back on a clean stop.
--
-- Population:
--   handbacks  durable, immutable once acknowledged: "this run, accepted
--              under (incarnation, session_id) and never started, is given
--              back to the dispatcher".  Written in two steps by
--              `exec-session close`: marked (asked_at) before the request,
--              so the run can never start from then on; acknowledged
--              (acked_at, requeued_as) once the dispatcher has answered.
--
-- Invariants (the database enforces those marked *):
--   1.* A run with a handback row never starts (run_mark_started() and the
--       due selection check it; a trigger refuses the start marker too).
--   2.* A handback row is never deleted, and once acknowledged never changes.
--   3.  A crash between the dispatcher's answer and the acknowledgement
--       leaves the row marked, not acknowledged: the run still never
--       starts here, and the dispatcher settles it (it already has, or it
--       asks through InspectRetainedRun: never started → re-queued).
CREATE TABLE handbacks (
	run_id       TEXT PRIMARY KEY REFERENCES accepts(run_id),
	incarnation  TEXT NOT NULL,
	session_id   TEXT NOT NULL,
	asked_at     INTEGER NOT NULL,
	acked_at     INTEGER,
	requeued_as  TEXT,                     -- the dispatcher's new run id
	refused_why  TEXT                      -- the dispatcher kept it (finished, not ours, ...)
) STRICT;
CREATE INDEX handbacks_binding ON handbacks(incarnation, session_id, acked_at);
CREATE TRIGGER handbacks_kept BEFORE DELETE ON handbacks
BEGIN SELECT RAISE(ABORT, 'a handback is kept'); END;
CREATE TRIGGER handbacks_fixed BEFORE UPDATE ON handbacks WHEN OLD.acked_at IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'an acknowledged handback is immutable'); END;
CREATE TRIGGER handbacks_never_start BEFORE UPDATE OF state ON runs
	WHEN NEW.state = 'started' AND EXISTS (SELECT 1 FROM handbacks WHERE run_id = NEW.run_id)
BEGIN SELECT RAISE(ABORT, 'a handed-back run never starts'); END;
