-- procflow schema, version 1 (PostgreSQL). Times are integer microseconds since the epoch (UTC).

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE definitions (
    name     TEXT PRIMARY KEY,
    dialect  TEXT NOT NULL,
    enabled  BIGINT NOT NULL DEFAULT 1,
    latest   BIGINT NOT NULL
);

CREATE TABLE versions (
    id          BIGSERIAL PRIMARY KEY,
    name        TEXT NOT NULL,
    version     BIGINT NOT NULL,
    dialect     TEXT NOT NULL,
    hash        TEXT NOT NULL,
    file        TEXT NOT NULL,
    project_dir TEXT NOT NULL,
    source      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (name, version)
);

-- Entity declarations currently deployed (for redeploy compatibility checks).
CREATE TABLE entities (
    name        TEXT PRIMARY KEY,
    app         TEXT NOT NULL,
    version_id  BIGINT NOT NULL,
    declaration TEXT NOT NULL
);

CREATE TABLE records (
    entity     TEXT NOT NULL,
    id         BIGINT NOT NULL,
    data       TEXT NOT NULL,
    owner      TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (entity, id)
);

CREATE TABLE runs (
    id            TEXT PRIMARY KEY,
    version_id    BIGINT NOT NULL,
    name          TEXT NOT NULL,
    dialect       TEXT NOT NULL,
    status        TEXT NOT NULL,
    started_at    BIGINT NOT NULL,
    ended_at      BIGINT,
    business_key  TEXT,
    record_entity TEXT,
    record_id     BIGINT,
    start_key     TEXT UNIQUE,       -- "<process>/<entity>/<id>": a process starts at most once per record
    state         TEXT NOT NULL DEFAULT '{}',
    output        TEXT,
    error         TEXT,
    seq           BIGINT NOT NULL DEFAULT 0,
    lease_owner   TEXT,
    lease_until   BIGINT
) WITH (fillfactor = 80);  -- room on the page: a run's per-step update stays HOT (no index writes)
CREATE INDEX runs_claimable ON runs (lease_until) WHERE status = 'running';
CREATE INDEX runs_by_status ON runs (status, started_at);
CREATE INDEX runs_by_record ON runs (record_entity, record_id);

CREATE TABLE tokens (
    id       BIGSERIAL PRIMARY KEY,
    run_id   TEXT NOT NULL,
    step     TEXT NOT NULL,
    path     TEXT NOT NULL,
    state    TEXT NOT NULL,            -- ready | waiting | failed
    attempt  BIGINT NOT NULL DEFAULT 1,
    since    BIGINT NOT NULL,
    wait     TEXT,                     -- JSON: why it waits
    data     TEXT NOT NULL DEFAULT '{}'
) WITH (fillfactor = 50);  -- short-lived rows updated at every step: keep those updates HOT
CREATE INDEX tokens_by_run ON tokens (run_id);

CREATE TABLE timers (
    id       BIGSERIAL PRIMARY KEY,
    run_id   TEXT NOT NULL,
    token_id BIGINT NOT NULL,
    kind     TEXT NOT NULL,
    due_at   BIGINT NOT NULL
);
CREATE INDEX timers_due ON timers (due_at);
CREATE INDEX timers_by_token ON timers (token_id);

CREATE TABLE history (
    run_id  TEXT NOT NULL,
    seq     BIGINT NOT NULL,
    at      BIGINT NOT NULL,
    type    TEXT NOT NULL,
    step    TEXT,
    path    TEXT,
    attempt BIGINT,
    data    TEXT,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE vars (
    run_id TEXT NOT NULL,
    name   TEXT NOT NULL,
    value  BYTEA NOT NULL,
    PRIMARY KEY (run_id, name)
);

CREATE TABLE outbox (
    id         BIGSERIAL PRIMARY KEY,
    channel    TEXT NOT NULL,
    recipient  TEXT NOT NULL,
    subject    TEXT,
    body       TEXT,
    run_id     TEXT,
    step       TEXT,
    created_at BIGINT NOT NULL
);
