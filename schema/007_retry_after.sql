-- execkit state schema, step 7: the dispatcher's Retry-After, kept.
--
-- A 429 or 503 with Retry-After ends a delivery pass at once, and no
-- result of that session is sent again before the time the dispatcher
-- named (epoch ms) — by any process: a pass, exec-report, a finishing run.
-- Heartbeats are never held back by it.  NULL: no wait asked.
ALTER TABLE sessions ADD COLUMN retry_after_at INTEGER;
