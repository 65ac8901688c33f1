-- procflow schema, version 9: flow control. "limits" counts, per flow and key value, the runs
-- that hold a place (active: started and not ended; a failed run keeps its place). A start and
-- an end of a limited flow lock the key's row, so the count is exact across workers; a run over
-- the limit waits with a wait of kind 'queue' (type 'queue:FLOW', keys the key value) and the end
-- that frees a place starts the oldest of them in its own transaction. "throttles" keeps, per
-- budget and key value, the start instants of the attempts of the last window (at most limit
-- of them); "throttle_budgets" the limit and window every deployed flow declared for a budget.

CREATE TABLE limits (
    flow   TEXT NOT NULL,
    key    TEXT NOT NULL,
    active BIGINT NOT NULL DEFAULT 0,
    lim    BIGINT,                            -- the newest version's limit (NULL: none known)
    PRIMARY KEY (flow, key)
);

CREATE TABLE throttles (
    name   TEXT NOT NULL,
    key    TEXT NOT NULL,
    starts TEXT NOT NULL DEFAULT '[]',
    promised BIGINT NOT NULL DEFAULT 0,         -- when the next refused attempt is told to come back
    PRIMARY KEY (name, key)
);

CREATE TABLE throttle_budgets (
    name     TEXT PRIMARY KEY,
    lim      BIGINT NOT NULL,
    per      BIGINT NOT NULL,                 -- microseconds
    declared TEXT NOT NULL                   -- the flow and step that declared it first
);

-- What a waiting token waits for (its wait's "kind"), a column of its own: the runs filter
-- "waiting for" and the metrics by kind read this index, not the JSON. (An update that keeps
-- a token ready at its next step changes neither indexed column: it stays a HOT update.)
ALTER TABLE tokens ADD COLUMN wait_kind TEXT GENERATED ALWAYS AS ((wait::json) ->> 'kind') STORED;
CREATE INDEX tokens_by_wait_kind ON tokens (wait_kind, run_id) WHERE wait_kind IS NOT NULL;

-- A limited flow's queue, oldest first: the end that frees a place reads the head of its key's
-- queue by this index, whatever the queue's length (SQLite's waits_by_key already ends with the
-- row id, which is token_id there).
CREATE INDEX waits_queue_order ON waits (type, keys, token_id) WHERE kind = 'queue';
