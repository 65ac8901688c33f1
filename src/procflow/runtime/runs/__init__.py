"""What every module that changes runs shares: the engine's narrow face for them (``host``, a
``Protocol``) and the rows a new run starts with (``starts``).

May import ``runtime.definitions``, ``runtime.interpret``, ``runtime.data`` and the base modules.
"""
