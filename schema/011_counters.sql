-- Counters for dashboards (exec-inspect metrics, execkit_*_total).
--
-- The rows they count are released (a delivered result leaves for a
-- receipt, receipts are pruned, evidence is exported), so a count of rows
-- would go down.  These counters only go up: each is kept by a trigger in
-- the same transaction as the change it counts, so a counter and its rows
-- never disagree after a crash, and no C commit path had to change.
-- Every series is seeded at 0, so a dashboard sees it before its first
-- event.  The reconcile passes are the one count no row change marks:
-- exec-reconcile adds them itself (name 'passes').
CREATE TABLE counters (
	name  TEXT NOT NULL,
	label TEXT NOT NULL DEFAULT '',         -- the outcome, for 'finished'
	value INTEGER NOT NULL DEFAULT 0 CHECK (value >= 0),
	PRIMARY KEY (name, label)
) STRICT, WITHOUT ROWID;

INSERT INTO counters(name, label) VALUES ('accepted', ''), ('started', ''),
	('finished', 'exited'), ('finished', 'killed'), ('finished', 'timeout'),
	('finished', 'cancelled'), ('finished', 'exec_failed'), ('finished', 'unknown'),
	('delivered', ''), ('refused', ''), ('attempts', ''), ('passes', '');

CREATE TRIGGER counters_fixed BEFORE UPDATE OF value ON counters
	WHEN NEW.value < OLD.value
BEGIN SELECT RAISE(ABORT, 'a counter never goes down'); END;

CREATE TRIGGER count_accepted AFTER INSERT ON accepts
BEGIN UPDATE counters SET value = value + 1 WHERE name = 'accepted' AND label = ''; END;

CREATE TRIGGER count_started AFTER UPDATE OF state ON runs
	WHEN OLD.state = 'queued' AND NEW.state = 'started'
BEGIN UPDATE counters SET value = value + 1 WHERE name = 'started' AND label = ''; END;

-- A run finishes once: with its chosen result, or as unknown (its
-- supervisor vanished before choosing one).
CREATE TRIGGER count_finished AFTER INSERT ON results
BEGIN UPDATE counters SET value = value + 1 WHERE name = 'finished' AND label = NEW.outcome; END;

CREATE TRIGGER count_unknown AFTER UPDATE OF state ON runs
	WHEN OLD.state <> 'unknown' AND NEW.state = 'unknown'
BEGIN UPDATE counters SET value = value + 1 WHERE name = 'finished' AND label = 'unknown'; END;

CREATE TRIGGER count_delivered AFTER INSERT ON receipts
BEGIN UPDATE counters SET value = value + 1 WHERE name = 'delivered' AND label = ''; END;

CREATE TRIGGER count_refused AFTER UPDATE OF refused ON results
	WHEN OLD.refused = 0 AND NEW.refused <> 0
BEGIN UPDATE counters SET value = value + 1 WHERE name = 'refused' AND label = ''; END;

-- An attempt is counted when it is begun.  One taken back because its
-- request was never sent (deliver.c) still counts here: a counter that
-- went down for it would read as a reset.
CREATE TRIGGER count_attempts AFTER UPDATE OF attempts ON results
	WHEN NEW.attempts > OLD.attempts
BEGIN
	UPDATE counters SET value = value + (NEW.attempts - OLD.attempts)
	WHERE name = 'attempts' AND label = '';
END;
