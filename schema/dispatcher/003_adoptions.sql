-- exec-dispatcher store schema, step 3: adoptions (doc/protocol.md,
-- "Adoption").
--
-- An ended session whose runs a later session of the same executor may
-- report.  One row per adopted session: the latest adopter wins, since an
-- executor has one current session at most.

CREATE TABLE IF NOT EXISTS adoptions(
	session_id TEXT PRIMARY KEY REFERENCES sessions(session_id),
	by_session TEXT NOT NULL REFERENCES sessions(session_id), adopted_ms INTEGER NOT NULL);
