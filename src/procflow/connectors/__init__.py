"""The connectors shipped with procflow (``builtin/``: ``http``, ``slack``, ``email``, ``log``).

They are plugins, written like a project's own connector: each action is ``fn(ctx, **args)``
against the public :class:`procflow.StepContext`, and each manifest is package data
(``builtin/<name>.yaml``) read by :mod:`procflow.model.connectors.registry`. Nothing here is
imported by the model or the runtime except by name, when an action is called.
"""
