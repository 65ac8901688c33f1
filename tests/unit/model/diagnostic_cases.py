"""Shared by the table-driven validation tests: a case, and "exactly these problems"."""

from __future__ import annotations

from collections.abc import Sequence

import pytest


def case(id: str, text: str, *expected: str) -> object:
    return pytest.param(text, list(expected), id=id)


def assert_exactly(lines: Sequence[str], expected: Sequence[str]) -> None:
    """Every expected substring is reported, and nothing else is."""
    missing = [e for e in expected if not any(e in line for line in lines)]
    unexpected = [line for line in lines if not any(e in line for e in expected)]
    assert not missing and not unexpected, (
        "\nmissing:\n  " + "\n  ".join(missing) + ("\nunexpected:\n  " + "\n  ".join(unexpected))
    )
