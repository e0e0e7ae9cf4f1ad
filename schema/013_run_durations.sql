-- execkit state schema, step 13: a histogram of run durations for the
-- dashboards (exec-inspect metrics, execkit_run_duration_seconds).
--
-- A run's duration is its result's choice less its start (chosen_at -
-- started_at, both copied onto the result when it is chosen: step 5).  The
-- rows go (receipts are pruned, evidence exported), so the histogram is
-- kept as counters (step 11) that only go up, by the same trigger that
-- inserts the result: name 'duration' with label the bucket's upper bound
-- in seconds ('+Inf' the last), 'duration_sum_ms' and 'duration_count'.
-- A result without a start (a cancel of a queued run) is no duration.
INSERT INTO counters(name, label) VALUES ('duration', '0.1'), ('duration', '0.5'),
	('duration', '1'), ('duration', '5'), ('duration', '30'), ('duration', '60'),
	('duration', '300'), ('duration', '1800'), ('duration', '3600'), ('duration', '+Inf'),
	('duration_sum_ms', ''), ('duration_count', '');
CREATE TRIGGER count_duration AFTER INSERT ON results
	WHEN NEW.started_at IS NOT NULL AND NEW.chosen_at >= NEW.started_at
BEGIN
	UPDATE counters SET value = value + CASE name WHEN 'duration_sum_ms'
		THEN NEW.chosen_at - NEW.started_at ELSE 1 END
	WHERE name = 'duration_sum_ms' OR name = 'duration_count' OR (name = 'duration' AND
		(label = '+Inf' OR CAST(label AS REAL) * 1000 >= NEW.chosen_at - NEW.started_at));
END;
