"""The ``notify`` action in the IR: a message to an address or to a field of a record.

A process step's ``notify`` and an intent schedule's ``notify`` compile into the same
:class:`Notify`, so both send alike; it lives below :mod:`procflow.model.schedule` and
:mod:`procflow.model.ir`, which both hold one (``ir`` re-exports it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: reading the IR needs no expression parser
    from procflow.expr import Placeholders

__all__ = ["Notify", "Recipient"]


@dataclass(frozen=True, slots=True)
class Recipient:
    """A literal address, or a field / one-hop ``relation.field`` path of the record."""

    address: str | None = None
    path: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Notify:
    to: Recipient
    subject: Placeholders
    body: Placeholders
