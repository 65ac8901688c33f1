"""Scheduled starts: a flow's schedules as durable timers of their own (``schedules`` rows).

- ``slots``: when a stored schedule's slots fall (its calendar), and the jitter of a due time.
- ``arming``: what a deploy, an enable or disable, a pause or a resume does to a schedule row.
- ``firing``: a due slot fires, starting its run (or counting why not) and arming the next slot,
  in one transaction; overlap and missed slots are decided here.
- ``calls``: what the faces ask: list, show, pause, resume, trigger, backfill.

This room may import the rooms below it (``data`` … ``operations``: a slot starts a run with
``runs.starts``, ``cancel_previous`` cancels with ``operations.lifecycle``) and never ``work``,
``engine`` or a face: the work loop and the engine call it.
"""
