-- execkit state schema, step 5: the start facts travel with the result.
--
-- When a result is chosen, the run's due time, start time and start marker
-- are copied onto it in the same transaction, so an InspectRetainedRun
-- answer for a result whose execution row was released still says whether
-- and when the run started.  NULL in a result chosen before this step.
-- Invariant: like the rest of a chosen result, these never change.
ALTER TABLE results ADD COLUMN due_at INTEGER;
ALTER TABLE results ADD COLUMN started_at INTEGER;
ALTER TABLE results ADD COLUMN start_marker TEXT;
CREATE TRIGGER results_facts_fixed BEFORE UPDATE OF due_at, started_at, start_marker ON results
BEGIN SELECT RAISE(ABORT, 'a chosen result is immutable'); END;
