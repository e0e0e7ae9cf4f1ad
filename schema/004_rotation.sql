-- execkit state schema, step 4: passes rotate through deliverable results.
--
-- A pass takes the results never tried first (last_attempt_at IS NULL
-- sorts first), then those whose last attempt is oldest, so results that
-- fail transiently forever cannot starve every result behind them.  The
-- index serves that order directly, still skipping refused rows.
DROP INDEX results_deliverable;
CREATE INDEX results_deliverable ON results(incarnation, session_id, last_attempt_at, chosen_at)
	WHERE refused = 0;
