"""The package's front (``procflow.expr``) loads each public name from its module on first use."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import procflow.expr as front


def test_no_public_name_is_also_a_module_of_the_package() -> None:
    # A loaded submodule is bound to the package's attribute of the same name, so such a name
    # would be the module for whoever imported it after the submodule was loaded.
    modules = {info.name for info in pkgutil.iter_modules(front.__path__)}
    assert not modules & set(front.__all__)


@pytest.mark.parametrize("name", front.__all__)
def test_every_public_name_is_what_its_module_defines(name: str) -> None:
    value = getattr(front, name)
    assert not isinstance(value, type(importlib))
    assert value is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = front.nothing  # type: ignore[attr-defined]
