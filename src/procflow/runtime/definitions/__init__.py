"""Deployed definitions: deploying files (``deploy``) and the catalog that compiles each stored
version once per process (``catalog``).

May import ``runtime.interpret``, ``runtime.data`` and the runtime's base modules.
"""
