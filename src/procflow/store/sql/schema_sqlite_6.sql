-- procflow schema, version 6: each intent process's version keeps the names of the vars it
-- declares (a JSON array; NULL for a flow, and for a version stored before this column), so
-- that showing a run lists its declared vars without compiling the definition.

ALTER TABLE versions ADD COLUMN vars TEXT;
