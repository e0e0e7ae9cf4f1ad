-- execkit state schema, step 15: why a run ended outlives its result.
--
-- A result's message (why it failed: "exec: No such file or directory",
-- "timed out after 5000 ms", ...) travelled only in the retained result,
-- so it was gone once the dispatcher acknowledged it; nothing said that
-- the captured output had been cut at --max-output either.  Now:
--
--   results.stdout_dropped, stderr_dropped
--              bytes of the guest's output dropped past the capture bound
--              (0: all kept), set when the result is chosen; NULL in a
--              result chosen without them (a cancel before the start, a
--              result chosen before this step).
--   receipts.message, stdout_dropped, stderr_dropped
--              copied from the result when it is acknowledged.
--   run_records.message, stdout_dropped, stderr_dropped
--              copied from the result or the receipt the record replaces
--              (evidence.c), so `exec-inspect show` tells why a run
--              failed and whether its output was cut for as long as the
--              state knows the run.
--
-- Invariant: like the rest of a chosen result, these never change.
ALTER TABLE results ADD COLUMN stdout_dropped INTEGER;
ALTER TABLE results ADD COLUMN stderr_dropped INTEGER;
ALTER TABLE receipts ADD COLUMN message TEXT;
ALTER TABLE receipts ADD COLUMN stdout_dropped INTEGER;
ALTER TABLE receipts ADD COLUMN stderr_dropped INTEGER;
ALTER TABLE run_records ADD COLUMN message TEXT;
ALTER TABLE run_records ADD COLUMN stdout_dropped INTEGER;
ALTER TABLE run_records ADD COLUMN stderr_dropped INTEGER;
CREATE TRIGGER results_dropped_fixed BEFORE UPDATE OF stdout_dropped, stderr_dropped ON results
BEGIN SELECT RAISE(ABORT, 'a chosen result is immutable'); END;
