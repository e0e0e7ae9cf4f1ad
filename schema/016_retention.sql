-- execkit state schema, step 16: what is settled for good may be forgotten.
--
-- `exec-reconcile --prune-records AGE` (retention.c) forgets a run once the
-- dispatcher has settled it for good and its last record is older than
-- AGE: its run record and its acceptance (the stored spec) go together,
-- and a lookup of it answers ABSENT from then on.  Settled for good means
-- one of two words of the dispatcher that the state holds:
--   - a run record with acked_at: its result was delivered and the
--     dispatcher acknowledged it (the record replaced the receipt);
--   - an acknowledged hand-back with requeued_as: the dispatcher took the
--     run back and re-queued its transaction under a new run id.
-- Nothing else is: a record of an unknown run, of a refused or undelivered
-- result (exported evidence), a hand-back not yet acknowledged or refused
-- by the dispatcher, a quarantined run the dispatcher may still ask about.
--
-- Invariants (the database enforces those marked *):
--   1.* A run record is deleted only when it is settled for good (replaces
--       nothing: until this step no record was ever deleted).
--   2.* A hand-back is deleted only once acknowledged with its new run id
--       (replaces invariant 2 of step 8, "never deleted").
--   3.  An ended session is deleted only when no row of any population
--       carries its binding any more, and never the newest one (the
--       lookup's shutdown marker is dated against it).
--   4.  Receipts are numbered past every run ever accepted (accept.c):
--       the 'accepted' counter, not MAX(rowid) of accepts, once acceptances
--       can go.
CREATE TRIGGER run_records_kept BEFORE DELETE ON run_records
	WHEN OLD.known <> 'finished' OR OLD.acked_at IS NULL
BEGIN SELECT RAISE(ABORT, 'a run record is kept until the dispatcher settled the run for good'); END;

DROP TRIGGER handbacks_kept;
CREATE TRIGGER handbacks_kept BEFORE DELETE ON handbacks
	WHEN OLD.acked_at IS NULL OR OLD.requeued_as IS NULL
BEGIN SELECT RAISE(ABORT, 'a handback is kept until the dispatcher re-queued its run'); END;
