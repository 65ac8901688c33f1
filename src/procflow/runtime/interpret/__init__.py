"""The two interpreters: from a run's rows to one :class:`~procflow.runtime.transition.Transition`.

``intent`` advances intent tokens, ``flow`` flow runs (their position in ``flow_state``); each
step's only I/O is a delegate or a connector action (``delegates``, ``actions``, ``flow_action``),
seen through ``context`` and bounded by ``deadlines``. Nothing here commits: the work loop does.
May import ``runtime.data`` and the runtime's base modules.
"""
