"""The work loop and its safety: claim runs (``loop``), advance each on a slot thread (``slots``,
``advancing``) under a watchdog, commit a batch together (``commit``), fire due timers, turn what a
run raises into its incident (``incidents``), and tell observers and traces what happened.

May import ``runtime.operations`` and every room below it.
"""
