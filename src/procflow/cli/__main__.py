"""``python -m procflow.cli``: the ``procflow`` command."""

from __future__ import annotations

from procflow.cli import main

main()
