-- exec-dispatcher store schema, step 1: sessions, runs and their results.
--
-- This is the reference dispatcher's own store (doc/protocol.md), not an
-- executor's state.  dispatcher/store.c applies every step at every open,
-- in one transaction, and each step creates only what is missing (IF NOT
-- EXISTS): a store written before a step existed gains its tables, and
-- nothing else changes.  The store keeps no schema version; its one fact
-- in meta is its incarnation, kept across restarts.
--
-- Tables (the invariants are numbered in dispatcher/routes.h):
--   meta      key/value facts about this store: 'incarnation'
--   sessions  one row per negotiation, and how it ended
--   runs      submitted work; submit_seq is the feed order
--   results   the one recorded result per run (invariant 1)
--   reports   every report to /v1/results, whatever its answer (invariant 2)
--   ledger    at most one charge per run (invariant 1)

CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);

-- cred_sha256 is the SHA-256 of the credential, never the credential
-- itself (invariant 3).
CREATE TABLE IF NOT EXISTS sessions(
	session_id TEXT PRIMARY KEY, incarnation TEXT NOT NULL,
	executor_id TEXT NOT NULL, cred_sha256 TEXT NOT NULL,
	status TEXT NOT NULL CHECK(status = 'current' OR status = 'revoked' OR status = 'expired' OR status = 'replaced' OR status = 'closed'),
	lease_expires_ms INTEGER NOT NULL, created_ms INTEGER NOT NULL);

-- spec is the run spec as canonical JSON (compact, sorted keys), so an
-- identical resubmission compares equal as text; max_in_flight is the
-- most reports of the run ever in flight at once.
CREATE TABLE IF NOT EXISTS runs(
	run_id TEXT PRIMARY KEY, submit_seq INTEGER NOT NULL UNIQUE,
	spec TEXT NOT NULL, cost INTEGER NOT NULL DEFAULT 0,
	state TEXT NOT NULL CHECK(state = 'queued' OR state = 'offered' OR state = 'accepted' OR state = 'rejected' OR state = 'finished'),
	owner_session TEXT, receipt TEXT,
	max_in_flight INTEGER NOT NULL DEFAULT 0, submitted_ms INTEGER NOT NULL);

-- record_id is what a duplicate report is answered with.
CREATE TABLE IF NOT EXISTS results(
	record_id INTEGER PRIMARY KEY AUTOINCREMENT,
	run_id TEXT NOT NULL UNIQUE REFERENCES runs(run_id),
	session_id TEXT NOT NULL, body TEXT NOT NULL, body_sha256 TEXT NOT NULL,
	recorded_at INTEGER NOT NULL);

-- status 0 = the connection was closed without an answer (a fault);
-- fault names the injected fault, if any.
CREATE TABLE IF NOT EXISTS reports(
	seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, session_id TEXT,
	body_sha256 TEXT, status INTEGER NOT NULL, error TEXT, fault TEXT,
	at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS reports_run ON reports(run_id);

CREATE TABLE IF NOT EXISTS ledger(
	run_id TEXT NOT NULL UNIQUE, charge INTEGER NOT NULL, at INTEGER NOT NULL);
