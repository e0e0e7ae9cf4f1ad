-- execkit state schema, step 1.
--
-- Populations (doc/recovery.md classifies each):
--   meta      durable: package version, executor id
--   sessions  durable: every negotiated binding and how it ended
--   accepts   durable: the identity of every accepted run (outlives the run)
--   runs      durable: execution rows, deleted after the report attempt
--   results   durable until acknowledged: the one chosen terminal result
--   receipts  durable for a retention window: proof of acknowledgement
--
-- The CHECKs of a column's words are written as OR chains, not IN lists:
-- SQLite builds an ephemeral index for an IN list at every execution of
-- the statement that checks it, a b-tree and a zeroed page for each run
-- accepted, started or finished (8% of a batch accept's instructions).
--
-- A binding is (incarnation, session_id).  The empty binding ('', '') is
-- what rows written before bindings existed carry; it never matches a
-- current session, so such rows are quarantined like any other old row.

CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT;

CREATE TABLE sessions (
	seq          INTEGER PRIMARY KEY,
	incarnation  TEXT NOT NULL,
	session_id   TEXT NOT NULL,
	dispatcher   TEXT NOT NULL,            -- base URL it was negotiated with
	credential   TEXT NOT NULL,            -- read by session.c only, never printed
	status       TEXT NOT NULL CHECK (status = 'current' OR status = 'replaced' OR
	                status = 'revoked' OR status = 'expired' OR status = 'closed'),
	opened_at    INTEGER NOT NULL,
	ended_at     INTEGER,
	lease_ms     INTEGER NOT NULL,
	heartbeat_ms INTEGER NOT NULL,
	last_beat_at INTEGER,
	UNIQUE (incarnation, session_id)
) STRICT;
-- At most one current session, enforced by the database.
CREATE UNIQUE INDEX sessions_one_current ON sessions(status) WHERE status = 'current';

CREATE TABLE accepts (
	run_id      TEXT PRIMARY KEY,
	txn_id      TEXT NOT NULL,
	incarnation TEXT NOT NULL DEFAULT '',
	session_id  TEXT NOT NULL DEFAULT '',
	content     TEXT NOT NULL,              -- canonical JSON of the accepted spec
	receipt     TEXT NOT NULL,
	accepted_at INTEGER NOT NULL
) STRICT;

CREATE TABLE runs (
	run_id       TEXT PRIMARY KEY REFERENCES accepts(run_id),
	txn_id       TEXT NOT NULL,
	incarnation  TEXT NOT NULL DEFAULT '',
	session_id   TEXT NOT NULL DEFAULT '',
	program      TEXT NOT NULL,
	args         TEXT NOT NULL,            -- JSON array of strings
	env          TEXT,                     -- JSON object or NULL
	cwd          TEXT,
	policy       TEXT,                     -- JSON object or NULL
	due_at       INTEGER NOT NULL,
	timeout_ms   INTEGER,
	state        TEXT NOT NULL DEFAULT 'queued' CHECK (state = 'queued' OR
	                state = 'started' OR state = 'unknown'),
	started_at   INTEGER,
	start_marker TEXT,                     -- set at the start commit point
	sup_pid      INTEGER,                  -- supervisor: pid + process start time
	sup_start    INTEGER,
	guest_pid    INTEGER,
	cancel_at    INTEGER,
	unknown_at   INTEGER,
	unknown_why  TEXT
) STRICT;
CREATE INDEX runs_due ON runs(incarnation, session_id, state, due_at);

CREATE TABLE results (
	run_id        TEXT PRIMARY KEY REFERENCES accepts(run_id),
	incarnation   TEXT NOT NULL,
	session_id    TEXT NOT NULL,
	outcome       TEXT NOT NULL CHECK (outcome = 'exited' OR outcome = 'killed' OR
	                 outcome = 'timeout' OR outcome = 'cancelled' OR outcome = 'exec_failed'),
	exit_code     INTEGER NOT NULL,
	wait_status   INTEGER,
	message       TEXT NOT NULL,
	chosen_at     INTEGER NOT NULL,
	body          BLOB NOT NULL,           -- the exact bytes every attempt sends
	attempts      INTEGER NOT NULL DEFAULT 0,
	last_attempt_at INTEGER,
	refused       INTEGER NOT NULL DEFAULT 0,
	refused_cause TEXT,
	last_diag     TEXT,                    -- bounded diagnostic of the last failure
	claim_owner   TEXT,                    -- single-flight delivery claim
	claim_until   INTEGER
) STRICT;
-- Selection of deliverable results never scans refused rows.
CREATE INDEX results_deliverable ON results(incarnation, session_id, chosen_at)
	WHERE refused = 0;

CREATE TABLE receipts (
	run_id      TEXT PRIMARY KEY REFERENCES accepts(run_id),
	incarnation TEXT NOT NULL,
	session_id  TEXT NOT NULL,
	outcome     TEXT NOT NULL,
	exit_code   INTEGER NOT NULL,
	acked_at    INTEGER NOT NULL,
	record_id   INTEGER NOT NULL,
	attempts    INTEGER NOT NULL
) STRICT;

-- A binding never changes once written.
CREATE TRIGGER accepts_binding_fixed BEFORE UPDATE OF incarnation, session_id, run_id ON accepts
BEGIN SELECT RAISE(ABORT, 'binding of an accepted run is immutable'); END;
CREATE TRIGGER runs_binding_fixed BEFORE UPDATE OF incarnation, session_id, run_id ON runs
BEGIN SELECT RAISE(ABORT, 'binding of a run is immutable'); END;
CREATE TRIGGER results_fixed BEFORE UPDATE OF incarnation, session_id, run_id,
	outcome, exit_code, wait_status, message, chosen_at, body ON results
BEGIN SELECT RAISE(ABORT, 'a chosen result is immutable'); END;
-- Unknown is a state: such a row is kept as evidence and never relabelled.
CREATE TRIGGER runs_unknown_kept BEFORE DELETE ON runs WHEN OLD.state = 'unknown'
BEGIN SELECT RAISE(ABORT, 'an unknown run is kept as evidence'); END;
CREATE TRIGGER runs_unknown_final BEFORE UPDATE OF state ON runs
	WHEN OLD.state = 'unknown' OR (OLD.state = 'started' AND NEW.state = 'queued')
BEGIN SELECT RAISE(ABORT, 'a started run is never re-queued and unknown is final'); END;
