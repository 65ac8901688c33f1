"""What a face asks of the engine, each inside its own transaction: a run's life outside the work
loop (``lifecycle``), record writes (``record_calls``), lists and views in the one JSON shape
(``listing``, ``views``), retention, group commit of short calls (``grouping``) and repeating a call
PostgreSQL rolled back (``conflicts``).

May import ``runtime.waits`` and every room below it.
"""
