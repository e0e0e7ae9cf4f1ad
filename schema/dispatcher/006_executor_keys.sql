-- exec-dispatcher store schema, step 6: executors bound to their keys
-- (doc/protocol.md, "The executor's key").
--
-- An executor_id is no secret: receipts carry it, /admin/sessions lists
-- it.  So a negotiation proves the executor's key too, and the dispatcher
-- binds the id to the key on the first negotiation that names the id.
-- From then on a negotiation naming that id without that key is refused
-- (403 executor_key_mismatch), and a session adopts only sessions
-- negotiated with the same key.
--
-- Like every step, this one is applied at every open and creates only what
-- is missing.  A session negotiated before this step existed has no row in
-- session_keys: no keyed session adopts it.

-- key_sha256 is the SHA-256 of the key, never the key (like cred_sha256,
-- invariant 3).  A binding is never changed or removed.
CREATE TABLE IF NOT EXISTS executor_keys(
	executor_id TEXT PRIMARY KEY,
	key_sha256 TEXT NOT NULL,
	bound_ms INTEGER NOT NULL);
CREATE TRIGGER IF NOT EXISTS executor_keys_kept BEFORE DELETE ON executor_keys
BEGIN SELECT RAISE(ABORT, 'an executor key binding is kept'); END;
CREATE TRIGGER IF NOT EXISTS executor_keys_fixed BEFORE UPDATE ON executor_keys
BEGIN SELECT RAISE(ABORT, 'an executor key binding never changes'); END;

-- The key each session was negotiated with (its SHA-256).
CREATE TABLE IF NOT EXISTS session_keys(
	session_id TEXT PRIMARY KEY REFERENCES sessions(session_id),
	key_sha256 TEXT NOT NULL);
