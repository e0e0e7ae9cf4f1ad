-- exec-dispatcher store schema, step 5: work conservation across sessions
-- (doc/protocol.md, "Hand-back, settlement and abandonment").
--
-- A run an executor accepted and never started does not stay with an
-- ended session for good: the executor hands it back, or the dispatcher
-- asks the executor's new session about it (InspectRetainedRun), and on
-- the answer re-queues it as a new run of the same transaction, keeps it
-- with that executor, or asks again later; a run nobody answers for is
-- abandoned in the end.  Never on a guess (invariant 7).
--
-- Like every step, this one is applied at every open and creates only what
-- is missing.  runs.state keeps its own five states (its CHECK cannot be
-- widened in place): a run's final state beyond them is in settlements,
-- and a run's state as the protocol shows it is COALESCE(settlements.state,
-- runs.state) (RUN_STATE in dispatcher/store.h).

-- When each session stopped being current.  The trigger stamps every end,
-- whichever statement made it (close, negotiation, admin, the lapse in
-- tx_begin()); an expired session ended when its lease ran out.  A session
-- that ended before this step existed is stamped, once, with its lease's
-- end: never earlier than its real end, so nothing is settled or abandoned
-- sooner than it should be.
CREATE TABLE IF NOT EXISTS session_ends(
	session_id TEXT PRIMARY KEY REFERENCES sessions(session_id),
	ended_ms INTEGER NOT NULL);
CREATE TRIGGER IF NOT EXISTS session_ends_stamp AFTER UPDATE OF status ON sessions
	WHEN old.status = 'current' AND new.status <> 'current'
BEGIN
	INSERT OR IGNORE INTO session_ends(session_id, ended_ms) VALUES(new.session_id,
	 CASE WHEN new.status = 'expired'
	 THEN MIN(new.lease_expires_ms, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))
	 ELSE CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) END);
END;
INSERT OR IGNORE INTO session_ends(session_id, ended_ms)
	SELECT session_id, lease_expires_ms FROM sessions WHERE status <> 'current';

-- How a run was settled, once; nothing here ever changes.
--   state        the run's final state: 'handed_back' (its executor handed
--                it back), 'requeued' (its executor's new session answered
--                that it never started, or does not have it), 'abandoned'
--                (no answer settled it in time); NULL: it stays with its
--                executor (answered as started), runs.state holds
--   how          handback, inspection_not_started, inspection_absent,
--                inspection_started, abandoned
--   requeued_as  the new run of the same transaction (handed_back, requeued)
--   inspection_id  the answer it was settled on (inspection_*)
CREATE TABLE IF NOT EXISTS settlements(
	run_id TEXT PRIMARY KEY REFERENCES runs(run_id),
	state TEXT CHECK(state = 'handed_back' OR state = 'requeued' OR state = 'abandoned'),
	how TEXT NOT NULL CHECK(how = 'handback' OR how = 'inspection_not_started' OR how = 'inspection_absent' OR how = 'inspection_started' OR how = 'abandoned'),
	requeued_as TEXT UNIQUE REFERENCES runs(run_id),
	inspection_id TEXT REFERENCES inspections(inspection_id),
	settled_ms INTEGER NOT NULL,
	CHECK((requeued_as IS NOT NULL) = (state = 'handed_back' OR state = 'requeued')));

-- The inspections the dispatcher itself asked (its reserved client
-- cli-settlement, which has no token: no client reads them) about the run
-- of an ended session owner_session, through its executor's current one.
CREATE TABLE IF NOT EXISTS settlement_asks(
	inspection_id TEXT PRIMARY KEY REFERENCES inspections(inspection_id),
	run_id TEXT NOT NULL REFERENCES runs(run_id),
	owner_session TEXT NOT NULL REFERENCES sessions(session_id),
	asked_ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS settlement_asks_run ON settlement_asks(run_id);

-- The settlement's lookups: an executor's sessions, a session's runs.
CREATE INDEX IF NOT EXISTS sessions_executor ON sessions(executor_id, status);
CREATE INDEX IF NOT EXISTS runs_owner ON runs(owner_session, state);
