-- execkit state schema, step 3: adoptions (doc/protocol.md, "Adoption").
--
-- Population:
--   adoptions  durable: "the results retained under the earlier binding
--              (incarnation, session_id) may be delivered by the later
--              session (by_incarnation, by_session_id)".  Written only by
--              `exec-session adopt`, and only after the dispatcher recorded
--              the same adoption.
--
-- Invariants (the database enforces those marked *):
--   1.* An adoption names two sessions of this state, never the same one
--       twice, and never changes once written.
--   2.  It gives authority only while its adopter is the current session:
--       a newer session must adopt again, explicitly.
--   3.  It relabels nothing: results keep the binding that accepted them
--       (and their stored bodies say so); execution rows of the earlier
--       binding stay quarantined.
CREATE TABLE adoptions (
	incarnation     TEXT NOT NULL,
	session_id      TEXT NOT NULL,
	by_incarnation  TEXT NOT NULL,
	by_session_id   TEXT NOT NULL,
	adopted_at      INTEGER NOT NULL,
	PRIMARY KEY (incarnation, session_id, by_incarnation, by_session_id),
	FOREIGN KEY (incarnation, session_id) REFERENCES sessions(incarnation, session_id),
	FOREIGN KEY (by_incarnation, by_session_id) REFERENCES sessions(incarnation, session_id),
	CHECK (incarnation <> by_incarnation OR session_id <> by_session_id)
) STRICT;
CREATE INDEX adoptions_by ON adoptions(by_incarnation, by_session_id);

CREATE TRIGGER adoptions_fixed BEFORE UPDATE ON adoptions
BEGIN SELECT RAISE(ABORT, 'an adoption never changes'); END;
