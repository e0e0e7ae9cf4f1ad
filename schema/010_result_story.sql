-- execkit state schema, step 10: a run's story outlives its execution row.
--
-- When a result is chosen, the run's program and arguments are copied onto
-- it in the same transaction (as its start facts are, step 5), and when it
-- is acknowledged its start and finish times go onto the receipt, so
-- `exec-inspect show` can still tell what ran, and when, after the
-- execution row (and then the result) is released.  NULL in rows written
-- before this step.  InspectRetainedRun never reads results.program or
-- results.args (inspect.c: its authorizer refuses them).
-- Invariant: like the rest of a chosen result, these never change.
ALTER TABLE results ADD COLUMN program TEXT;
ALTER TABLE results ADD COLUMN args TEXT;             -- JSON array of strings
ALTER TABLE receipts ADD COLUMN started_at INTEGER;
ALTER TABLE receipts ADD COLUMN chosen_at INTEGER;
CREATE TRIGGER results_story_fixed BEFORE UPDATE OF program, args ON results
BEGIN SELECT RAISE(ABORT, 'a chosen result is immutable'); END;
