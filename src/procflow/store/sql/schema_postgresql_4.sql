-- procflow schema, version 4 (PostgreSQL): what the HTTP API needs. Every list it serves pages
-- newest first by key (WHERE key < cursor ORDER BY key DESC LIMIT n), so each filter has an index
-- that ends in that key; and the responses of requests sent with an Idempotency-Key, kept a day.

CREATE INDEX runs_by_status_id ON runs (status, id);
CREATE INDEX runs_by_name_id ON runs (name, id);

DROP INDEX tasks_open;
CREATE INDEX tasks_open ON tasks (status, assignee, id);
CREATE INDEX tasks_by_status_id ON tasks (status, id);

-- A definition's place in the list: the id of its first version (newest definitions first; a
-- redeploy does not move it).
ALTER TABLE definitions ADD COLUMN first_version BIGINT;
UPDATE definitions SET first_version = (
    SELECT min(v.id) FROM versions v WHERE v.name = definitions.name
);
CREATE INDEX definitions_by_first_version ON definitions (first_version);

-- The first response to a create request sent with an Idempotency-Key, per caller and key: a
-- repeat with the same route and body gets it again, and nothing is done twice.
CREATE TABLE idempotency (
    caller     TEXT NOT NULL,
    key        TEXT NOT NULL,
    route      TEXT NOT NULL,      -- "POST /flows/greet/runs"
    body_hash  TEXT NOT NULL,      -- SHA-256 of the body as canonical JSON
    status     INTEGER NOT NULL,
    response   TEXT NOT NULL,      -- JSON: {"headers": {...}, "body": ...}
    created_at BIGINT NOT NULL,    -- the machine's clock, microseconds: pruned after 24 hours
    PRIMARY KEY (caller, key)
);
CREATE INDEX idempotency_by_time ON idempotency (created_at);
