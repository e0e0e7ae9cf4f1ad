-- exec-dispatcher store schema, step 2: inspections (doc/protocol.md,
-- InspectRetainedRun through the dispatcher).
--
-- A client's lookup waits here until the executor holding session_id pulls
-- it, answers it locally and posts the answer.  run_id is stored as the
-- client sent it: judging it is the executor's business.  The answer (its
-- JSON) is recorded once, only from the session the row names, and never
-- with a field its outcome does not have (invariant 5).

CREATE TABLE IF NOT EXISTS inspections(
	inspection_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, run_id TEXT NOT NULL,
	status TEXT NOT NULL CHECK(status = 'pending' OR status = 'answered'), answer TEXT,
	created_ms INTEGER NOT NULL, answered_ms INTEGER);
CREATE INDEX IF NOT EXISTS inspections_session ON inspections(session_id, status);
