-- procflow schema, version 8: flows that call flows. A call step starts a child run and parks
-- its token on it, in one transaction; this table links the two (the child's row stays an
-- ordinary run). A waiting parent's token has a wait of kind 'call' keyed by the child's id:
-- the child's final commit takes that wait and resumes the parent in the same transaction, and
-- a call's timeout takes it instead (exactly one of them wins, as for wait_for). Views read the
-- links both ways; cancelling a parent cancels its waiting children through them; purge keeps
-- a child while its parent is kept.

CREATE TABLE calls (
    child_id   TEXT PRIMARY KEY,
    parent_id  TEXT NOT NULL,
    step       TEXT NOT NULL,                  -- the call step's path in the parent
    flow       TEXT NOT NULL,                  -- the flow called
    detached   BIGINT NOT NULL DEFAULT 0,
    depth      BIGINT NOT NULL                 -- 1 for a top-level run's child
);
CREATE INDEX calls_by_parent ON calls (parent_id);
