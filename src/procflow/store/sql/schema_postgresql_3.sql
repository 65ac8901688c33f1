-- procflow schema, version 3 (PostgreSQL): the outside world — events, what runs wait for, user tasks.

-- Accepted events, deduplicated by id, kept for lookback (pruned after the longest window).
CREATE TABLE events (
    id          TEXT PRIMARY KEY,
    type        TEXT NOT NULL,
    keys        TEXT NOT NULL,       -- canonical JSON of the correlation values (correlate_on order)
    data        TEXT NOT NULL,
    accepted_at BIGINT NOT NULL
);
CREATE INDEX events_by_key ON events (type, keys, accepted_at);
CREATE INDEX events_by_time ON events (accepted_at);

-- Which event reached which run (a wait's lookback never takes the same event twice).
CREATE TABLE deliveries (
    event_id TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    PRIMARY KEY (event_id, run_id)
);

-- A token parked until something outside happens: an event (kind 'event', type = the event
-- type, keys = its correlation values) or a record write (kind 'record', type =
-- 'Entity:onCreate:via', keys = the id of the record it must belong to). Looked up by value.
CREATE TABLE waits (
    token_id BIGINT PRIMARY KEY,
    run_id   TEXT NOT NULL,
    kind     TEXT NOT NULL,
    type     TEXT NOT NULL,
    keys     TEXT NOT NULL,
    since    BIGINT NOT NULL
);
CREATE INDEX waits_by_key ON waits (type, keys);
CREATE INDEX waits_by_run ON waits (run_id);

-- Intent user tasks.
CREATE TABLE tasks (
    id            BIGSERIAL PRIMARY KEY,
    run_id        TEXT NOT NULL,
    token_id      BIGINT,
    step          TEXT NOT NULL,
    assignee      TEXT NOT NULL,
    assignee_kind TEXT NOT NULL,     -- role | user
    form          TEXT,
    actions       TEXT NOT NULL,     -- JSON list (empty: free text)
    fields        TEXT NOT NULL,     -- JSON list of writable fields
    record_entity TEXT,
    record_id     BIGINT,
    status        TEXT NOT NULL,     -- open | completed | withdrawn
    created_at    BIGINT NOT NULL,
    ended_at      BIGINT,
    action        TEXT,
    done_by       TEXT,
    data          TEXT
);
CREATE INDEX tasks_open ON tasks (status, assignee);
CREATE INDEX tasks_by_run ON tasks (run_id);
