-- procflow schema, version 2 (SQLite): a flow loop's items and finished iteration scopes, one row
-- each, so the run row stays small however long the loop (n = -1 holds the for_each items).

CREATE TABLE scopes (
    run_id TEXT NOT NULL,
    path   TEXT NOT NULL,
    n      INTEGER NOT NULL,
    data   TEXT NOT NULL,
    PRIMARY KEY (run_id, path, n)
) WITHOUT ROWID;
