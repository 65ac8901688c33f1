"""The operations tests' one fixture: the small flow project of :mod:`opsite` on the test's
store, its engine closed when the test ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opsite import Site, make_site


@pytest.fixture
def site(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Site]:
    made = make_site(tmp_path, db_url, db_env)
    try:
        yield made
    finally:
        made.engine.close()
