-- execkit state schema, step 6: an orphaned guest keeps its share.
--
-- A run whose supervisor vanished becomes unknown, but its guest may still
-- be running and still using its bandwidth.  Its share memberships are
-- therefore kept until the guest is confirmed gone (run_sweep() checks the
-- guest's pid and process start time, recorded here when it is spawned),
-- instead of being dropped the moment the run becomes unknown.  This
-- replaces invariant 4 of step 2 for unknown runs; a deleted execution
-- row still leaves every dimension.
ALTER TABLE runs ADD COLUMN guest_start INTEGER;
DROP TRIGGER runs_unknown_leave_shares;
