"""The queries of a run's own rows, from its start to its purge: the run row (``runs``), its
tokens, timers, waits, leases, history and loop rows (``run_data``), new runs written together
(``starts``), the links of calls (``calls``), the places and budgets of flow control
(``limits``), and purge.

May import ``store.queries.base`` and the store's rows, codec and dialect modules.
"""
