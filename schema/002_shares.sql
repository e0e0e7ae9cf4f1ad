-- execkit state schema, step 2: bandwidth shares (doc/shares.md).
--
-- Populations:
--   share_dims     durable: one row per dimension ('executor' or 'dest:NAME'):
--                  its capacity and its generation counter
--   share_members  transient: the running programs of each dimension, joined
--                  when a guest starts and left when its result is chosen
--   share_cache    derived: each computed share, stamped with the generation
--                  of its dimension it was computed at
--
-- Invalidation (the database performs it, so no writer can forget it):
--   1.* A dimension's generation rises exactly when its capacity changes or a
--       program joins or leaves it — never because of another dimension.
--   2.* A cached share is fresh iff its generation equals its dimension's;
--       a stale share stays stale until that very (run, dimension) is
--       recomputed: reading another share never touches it.
--   3.* A cached share exists only for a (run, dimension) membership: a
--       destination a run did not declare has no share at all.
--   4.* A run whose execution row is deleted or becomes unknown leaves every
--       dimension, even if its supervisor never called shares_leave().

CREATE TABLE share_dims (
	dimension    TEXT PRIMARY KEY CHECK (dimension = 'executor' OR
	                (substr(dimension, 1, 5) = 'dest:' AND length(dimension) > 5)),
	capacity     INTEGER CHECK (capacity >= 0),   -- bytes/s; NULL = no limit set
	generation   INTEGER NOT NULL DEFAULT 0,
	members      INTEGER NOT NULL DEFAULT 0,      -- programs in the dimension
	total_weight INTEGER NOT NULL DEFAULT 0,      -- Σ share_members.weight
	changed_at   INTEGER                          -- last capacity change, ms
) STRICT;

CREATE TABLE share_members (
	run_id    TEXT NOT NULL,
	dimension TEXT NOT NULL,
	weight    INTEGER NOT NULL CHECK (weight BETWEEN 1 AND 1000000000000),
	                                              -- policy.weight in millionths
	joined_at INTEGER NOT NULL,
	PRIMARY KEY (run_id, dimension)
) STRICT, WITHOUT ROWID;
-- The members of one dimension, for its recomputation.
CREATE INDEX share_members_dim ON share_members(dimension, run_id, weight);

CREATE TABLE share_cache (
	run_id      TEXT NOT NULL,
	dimension   TEXT NOT NULL,
	share       INTEGER,                         -- bytes/s; NULL = no limit
	generation  INTEGER NOT NULL,                -- share_dims.generation it was computed at
	computed_at INTEGER NOT NULL,
	-- Clustered by dimension: recomputing one dimension writes few pages.
	PRIMARY KEY (dimension, run_id),
	FOREIGN KEY (run_id, dimension) REFERENCES share_members(run_id, dimension)
		ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

-- Invariant 1: joining or leaving bumps the generation of that dimension only.
-- In a dimension without a capacity every share is unlimited whoever runs,
-- so joining and leaving invalidate nothing there (and rewrite no file).
CREATE TRIGGER share_join AFTER INSERT ON share_members
BEGIN
	INSERT OR IGNORE INTO share_dims(dimension) VALUES (NEW.dimension);
	UPDATE share_dims SET generation = generation + (capacity IS NOT NULL), members = members + 1,
		total_weight = total_weight + NEW.weight
	WHERE dimension = NEW.dimension;
END;
CREATE TRIGGER share_leave AFTER DELETE ON share_members
BEGIN
	UPDATE share_dims SET generation = generation + (capacity IS NOT NULL), members = members - 1,
		total_weight = total_weight - OLD.weight
	WHERE dimension = OLD.dimension;
END;
CREATE TRIGGER share_weight_fixed BEFORE UPDATE ON share_members
BEGIN SELECT RAISE(ABORT, 'a membership is fixed: leave and join again'); END;

-- Invariant 1: a capacity change bumps the generation of its own dimension.
CREATE TRIGGER share_capacity AFTER UPDATE OF capacity ON share_dims
	WHEN NEW.capacity IS NOT OLD.capacity
BEGIN
	UPDATE share_dims SET generation = generation + 1 WHERE dimension = NEW.dimension;
END;

-- Invariant 4: the execution row is the authority on what is running.
CREATE TRIGGER runs_unknown_leave_shares AFTER UPDATE OF state ON runs
	WHEN NEW.state = 'unknown'
BEGIN DELETE FROM share_members WHERE run_id = NEW.run_id; END;
CREATE TRIGGER runs_deleted_leave_shares AFTER DELETE ON runs
BEGIN DELETE FROM share_members WHERE run_id = OLD.run_id; END;
