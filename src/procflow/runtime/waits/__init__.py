"""What wakes a waiting run: accepting events and delivering them (``delivery``), user tasks
(``tasks``) and record waits with ``abortOn`` (``record_waits``), each inside the caller's
transaction.

May import ``runtime.runs`` and every room below it.
"""
