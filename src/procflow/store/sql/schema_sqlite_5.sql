-- procflow schema, version 5 (SQLite): what operations read. The metrics gauges count runs by
-- (status, definition) and waiting runs by what they wait for, each from one index alone (no
-- table row read); purge finds ended runs by (status, started_at) and deletes by run id, which
-- timers, deliveries and outbox could not do without a scan.

CREATE INDEX runs_by_status_name ON runs (status, name);
CREATE INDEX timers_by_run ON timers (run_id, kind);
CREATE INDEX waits_by_kind ON waits (kind, run_id);
CREATE INDEX deliveries_by_run ON deliveries (run_id);
CREATE INDEX outbox_by_run ON outbox (run_id);
