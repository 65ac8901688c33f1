"""The runtime's own processes: ``procflow run`` (``oneshot``) and ``procflow worker`` (``worker``).

May import ``runtime.engine`` and every room below it.
"""
