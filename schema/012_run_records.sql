-- execkit state schema, step 12: what is known of a run outlives its rows,
-- and every start is counted and told to the dispatcher.
--
-- Populations:
--   run_records    durable until dropped explicitly: "this run, accepted
--                  under (incarnation, session_id), finished with outcome
--                  (or is unknown), and its evidence went there".  Written
--                  by every path that removes the last row telling what
--                  became of a run (exec-reconcile --export-evidence and
--                  --prune-receipts), in the transaction that removes it,
--                  so InspectRetainedRun answers FOUND, never ABSENT, for a
--                  run this state has any record of (inspect.c).
--   start_counter  durable: how many runs were ever started here.  It rises
--                  in each start marker's own transaction (the trigger
--                  below), and travels with every heartbeat and negotiation:
--                  a dispatcher that has heard a higher count from this
--                  executor knows this state is an older copy (a restore),
--                  and never takes its "not started" for proof.
--   start_notices  transient: the runs started here that the dispatcher has
--                  not yet been told of (a heartbeat tells it, then they go).
--
-- Invariants (the database enforces those marked *):
--   1.* The start count never goes down.
--   2.* Every start marker commits with its count and its notice.
--   3.  A run record is written before, in the same transaction as, the
--       delete of the rows it replaces.
CREATE TABLE run_records (
	run_id      TEXT PRIMARY KEY REFERENCES accepts(run_id),
	txn_id      TEXT NOT NULL,
	incarnation TEXT NOT NULL,
	session_id  TEXT NOT NULL,
	known       TEXT NOT NULL CHECK (known = 'finished' OR known = 'unknown'),
	outcome     TEXT,                    -- results.outcome, for 'finished'
	exit_code   INTEGER,
	started_at  INTEGER,
	chosen_at   INTEGER,
	acked_at    INTEGER,                 -- the dispatcher's acknowledgement, if any
	evidence    TEXT NOT NULL,           -- where the evidence went, in words
	recorded_at INTEGER NOT NULL
) STRICT;

CREATE TABLE start_counter (
	one    INTEGER PRIMARY KEY CHECK (one = 1),
	starts INTEGER NOT NULL CHECK (starts >= 0)
) STRICT;
INSERT INTO start_counter(one, starts) VALUES (1, 0);
CREATE TRIGGER start_counter_up BEFORE UPDATE OF starts ON start_counter
	WHEN NEW.starts < OLD.starts
BEGIN SELECT RAISE(ABORT, 'the start count never goes down'); END;

CREATE TABLE start_notices (
	seq    INTEGER PRIMARY KEY,          -- the count this start brought
	run_id TEXT NOT NULL
) STRICT;
CREATE TRIGGER start_counted AFTER UPDATE OF state ON runs
	WHEN OLD.state = 'queued' AND NEW.state = 'started'
BEGIN
	UPDATE start_counter SET starts = starts + 1;
	INSERT INTO start_notices(seq, run_id) SELECT starts, NEW.run_id FROM start_counter;
END;
