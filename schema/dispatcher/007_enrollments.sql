-- exec-dispatcher store schema, step 7: enrollment tokens (doc/protocol.md,
-- "Enrollment").
--
-- An executor id the dispatcher has never seen is bound to its key
-- (executor_keys, step 6) only by a negotiation that presents an
-- enrollment token the operator issued (POST /admin/enrollments): without
-- it any local user could pose as a new executor, take queued runs and
-- report results for them.  A token enrolls up to `uses` ids; each
-- enrollment spends one.  token_sha256 is the SHA-256 of the token, never
-- the token (invariant 3).
CREATE TABLE IF NOT EXISTS enrollments(
	enrollment_id TEXT PRIMARY KEY,
	token_sha256 TEXT NOT NULL UNIQUE,
	uses_left INTEGER NOT NULL CHECK (uses_left >= 0),
	created_ms INTEGER NOT NULL);
