"""Testing procflow definitions.

- ``procflow test``'s engine, for Python: :func:`run_scenarios` runs the scenarios of
  ``*.test.yaml`` files and returns one :class:`Result` each (:func:`run_suite` adds coverage).
- A pytest plugin (``pytest_plugins = ["procflow.testing"]`` in a ``conftest.py``): the
  virtual-clock ``engine`` fixture, and :func:`fake_delegate` / :func:`fake_action` for a block.
  Loaded only where pytest is installed: ``procflow test`` itself does not need it.
"""

from __future__ import annotations

from procflow.testing.runner import Result, Suite, run_scenarios, run_suite

__all__ = [
    "Result",
    "Suite",
    "engine",
    "fake_action",
    "fake_delegate",
    "run_scenarios",
    "run_suite",
]

try:
    from procflow.testing.fixtures import engine, fake_action, fake_delegate
except ModuleNotFoundError as exc:  # pytest is a development dependency
    if exc.name != "pytest":
        raise
