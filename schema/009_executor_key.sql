-- execkit state schema, step 9: the executor's key.
--
-- Population:
--   meta 'executor_key'  durable, never changes: 64 hex digits (32 bytes
--              from getrandom(2)), written by state.c when the state
--              directory is created, in the same transaction as
--              'executor_id'.  The executor proves it when it negotiates a
--              session (doc/protocol.md, "The executor's key"); the
--              reference dispatcher binds executor_id to it on first use,
--              and from then on opens sessions for that executor id, and
--              lets them adopt its earlier sessions, only with it.
--
--              It is a credential like sessions.credential: state.db is
--              0600 and out of the guests' reach (doc/security.md), only
--              exec-session reads it (state_executor_key()), and no tool
--              prints it or puts it in JSON output.
--
-- Invariants (the database enforces those marked *):
--   1.* The key is never changed or deleted: the dispatcher has bound this
--       executor id to it, and a state with another key (or none) could
--       never negotiate as this executor again.
--   2.  A state of an earlier schema has no key: it is refused by the
--       version gate (state.c), like every state of another schema.
CREATE TRIGGER meta_executor_key_kept BEFORE DELETE ON meta WHEN OLD.key = 'executor_key'
BEGIN SELECT RAISE(ABORT, 'the executor key is kept'); END;
CREATE TRIGGER meta_executor_key_fixed BEFORE UPDATE ON meta
	WHEN OLD.key = 'executor_key' OR NEW.key = 'executor_key'
BEGIN SELECT RAISE(ABORT, 'the executor key never changes'); END;
