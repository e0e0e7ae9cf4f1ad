-- exec-dispatcher store schema, step 4: clients (doc/protocol.md,
-- "Clients").
--
-- A client of the dispatcher's inspection API, issued by an operator
-- (POST /admin/clients).  token_sha256 is the SHA-256 of the client's
-- token, never the token itself (invariant 3); a revoked client's token
-- is refused from then on, and the row stays, so its inspections keep
-- their owner.

CREATE TABLE IF NOT EXISTS clients(
	client_id TEXT PRIMARY KEY, name TEXT NOT NULL,
	token_sha256 TEXT NOT NULL UNIQUE,
	status TEXT NOT NULL CHECK(status = 'active' OR status = 'revoked'),
	created_ms INTEGER NOT NULL, revoked_ms INTEGER);

-- Which client asked each inspection: only that client reads it
-- (invariant 6).  A table of its own rather than a column of inspections,
-- so that a store written before this step gains it with IF NOT EXISTS;
-- an inspection asked before then has no row here and no client reads it.
CREATE TABLE IF NOT EXISTS inspection_clients(
	inspection_id TEXT PRIMARY KEY REFERENCES inspections(inspection_id),
	client_id TEXT NOT NULL REFERENCES clients(client_id));
