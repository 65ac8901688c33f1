"""The durable runtime: running deployed definitions, committing every change of a run.

Its rooms, lowest first; a module imports only from its own room and the rooms listed before it
(``tests/unit/test_architecture.py`` holds the order and checks it):

- ``clock``, ``transition``, ``faults``: time, what one committed change does, fault points;
- ``data/``: what users hand the engine (JSON, inputs, records, events, secrets, identities),
  checked and shaped; nothing here writes to the store;
- ``interpret/``: the two interpreters, pure decisions from a run's rows to a ``Transition``,
  and the one I/O they make (delegates, connector actions, under a deadline);
- ``definitions/``: deploying files and the compiled catalog of deployed versions;
- ``runs/``: the engine's narrow face for modules that change runs, and the rows a run starts with;
- ``waits/``: what wakes a waiting run: events and their delivery, user tasks, record waits;
- ``operations/``: what a face asks for inside its own transaction: starting, cancelling and
  retrying runs, record writes, lists and views, retention, group commit, deadlock retries;
- ``work/``: the work loop and its safety: claims, slots, watchdog, commit, incidents, timers;
- ``engine``: where it is wired together, the calls every face makes;
- ``commands/``: ``procflow run`` and ``procflow worker``, on top of the engine.

The runtime imports ``errors``, ``states``, ``config``, ``expr``, ``store`` and ``model``, never a
face.
"""
