-- procflow schema, version 7: scheduled starts. A schedule is a durable timer of its own: its
-- row holds the armed slot's nominal instant (next_slot) and when it fires (due_at, the slot
-- plus its jitter), indexed like the timers, so that looking for due work stays two index
-- probes. Firing a slot and arming the next are one transaction on this row; the run a slot
-- starts carries the start key "schedule:<key>@<slot>", so one slot starts at most one run
-- however many workers fire it. An intent schedule (a sweep) keeps in "sweep" the slot it is
-- working through (the last record id done, committed with each batch's actions, so a slot
-- resumed after a crash acts on no record twice) and the outcomes of its last slots.

CREATE TABLE schedules (
    key        TEXT PRIMARY KEY,               -- FLOW, or FLOW/NAME
    flow       TEXT NOT NULL,
    name       TEXT NOT NULL,
    spec       TEXT NOT NULL,                  -- the compiled schedule of the newest version (JSON)
    plan       TEXT NOT NULL,                  -- how its runs start: version, first step, inputs
    paused     INTEGER NOT NULL DEFAULT 0,
    note       TEXT,                           -- why it was paused
    disabled   INTEGER NOT NULL DEFAULT 0,     -- its flow is disabled
    next_slot  INTEGER,                         -- NULL: nothing armed (ended, paused, disabled)
    due_at     INTEGER,
    buffered   INTEGER,                         -- a slot waiting for the open run to end (buffer_one)
    open_runs  TEXT NOT NULL DEFAULT '[]',     -- runs it started that had not ended when last seen
    last_slot  INTEGER,
    last_run   TEXT,
    started    INTEGER NOT NULL DEFAULT 0,
    skipped    INTEGER NOT NULL DEFAULT 0,
    missed     INTEGER NOT NULL DEFAULT 0,
    buffers    INTEGER NOT NULL DEFAULT 0,      -- slots that waited (buffer_one)
    error      TEXT,                           -- why its last slot could not start its run
    sweep      TEXT                            -- an intent schedule's sweep: progress, outcomes (JSON)
);
CREATE INDEX schedules_due ON schedules (due_at);
CREATE INDEX schedules_by_flow ON schedules (flow);
