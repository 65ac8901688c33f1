"""Definitions as data: YAML with positions in, the one IR out, every problem reported at once.

Its rooms, lowest first; a module imports only from its own room and those before it
(``tests/unit/test_architecture.py`` holds the order and checks it):

- ``source``: positions and diagnostics;
- ``values``: plain values as definitions type them (how one reads in a message, whether a
  literal is of a schema type), shared with the runtime's checks of user data;
- ``reading/``: safe YAML 1.2 into nodes that remember where they came from, typed accessors,
  bounded file reads;
- ``access``: record permissions (a role, an entity, an action), part of the IR;
- ``notify``: the ``notify`` action (a process step's and an intent schedule's), part of the IR;
- ``schedule``: scheduled starts (a flow's schedules) and intent schedules (sweeps), part of the
  IR;
- ``connector_ir``: the IR of connector manifests (actions, events, config);
- ``ir``: the intermediate representation both dialects compile into;
- ``connectors/``: connector manifests and where they are found;
- ``intent/``: the intent dialect's compiler;
- ``flow/``: the flow dialect's compiler (it shares the intent dialect's typed values);
- ``validate``: loading a definition file of either dialect.

The model imports ``errors``, ``states``, ``config`` and ``expr``; never the store, the runtime or a
face.
"""
