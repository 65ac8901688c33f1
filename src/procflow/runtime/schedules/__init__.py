"""Scheduled starts: a flow's schedules, and an intent file's (sweeps), as durable timers of
their own (``schedules`` rows).

- ``slots``: when a stored schedule's slots fall (its calendar), and the jitter of a due time;
  which missed slots fire; what firing did.
- ``arming``: what a deploy, an enable or disable, a pause or a resume does to a schedule row.
- ``firing``: a due slot fires, starting its run (or counting why not) and arming the next slot,
  in one transaction; overlap and missed slots are decided here. An intent schedule's slot goes
  to ``sweeps``.
- ``sweeps``: an intent schedule's slot, a batch of records per transaction, its place kept
  with each batch; ``sweep_match`` (its ``where`` at the slot's instant) and ``sweep_actions``
  (notify, generate, start for one record).
- ``calls``: what the faces ask: list, show, pause, resume, trigger, backfill.

This room may import the rooms below it (``data`` … ``operations``: a slot starts a run with
``runs.starts``, ``cancel_previous`` cancels with ``operations.lifecycle``, a sweep's notify
sends with ``interpret.actions`` and its generate writes with ``operations.record_calls``) and
never ``work``, ``engine`` or a face: the work loop and the engine call it.
"""
