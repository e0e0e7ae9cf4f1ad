-- execkit state schema, step 17: a run settled for good keeps its story,
-- not its spec.
--
-- `exec-reconcile --prune-receipts` (evidence.c) replaces a receipt with a
-- run record.  In the same transaction it now also drops the run's stored
-- spec (accepts.content), which may be large and whose environment values
-- may be secrets, and keeps only what the operator's story shows and what
-- identity needs:
--   - run_records gains program, args, env_names (the spec's environment
--     names, never their values), cwd and timeout_ms, copied from the spec;
--   - accepts keeps its row (run id, transaction id, binding, receipt,
--     accepted_at) with content '' and content_sha256, the SHA-256 of the
--     canonical spec it replaced.  A later accept of the same run id is
--     still told apart: the same spec hashes the same (a duplicate,
--     answered with the original receipt), any other is a conflict.
--
-- Invariants (the database enforces those marked *):
--   1.* A spec is dropped only once its run is settled for good (a finished
--       run record the dispatcher acknowledged, as step 16 defines it), only
--       to '' with its digest, and never comes back.
--   2.* The digest of a dropped spec never changes.
--   3.  The record's copy of the spec is written in the transaction that
--       drops the spec (evidence.c), so no run is left with neither.
ALTER TABLE accepts ADD COLUMN content_sha256 TEXT;
ALTER TABLE run_records ADD COLUMN program TEXT;
ALTER TABLE run_records ADD COLUMN args TEXT;            -- JSON array of strings
ALTER TABLE run_records ADD COLUMN env_names TEXT;       -- JSON array of names, or NULL
ALTER TABLE run_records ADD COLUMN cwd TEXT;
ALTER TABLE run_records ADD COLUMN timeout_ms INTEGER;

CREATE TRIGGER accepts_spec_kept BEFORE UPDATE OF content, content_sha256 ON accepts
	WHEN OLD.content = '' OR NEW.content <> '' OR NEW.content_sha256 IS NULL
		OR length(NEW.content_sha256) <> 64
		OR NOT EXISTS (SELECT 1 FROM run_records r WHERE r.run_id = OLD.run_id
			AND r.known = 'finished' AND r.acked_at IS NOT NULL)
BEGIN SELECT RAISE(ABORT, 'an accepted spec is kept until its run is settled for good'); END;
