"""The flow file's step ids, collected before anything is compiled.

Ids are unique in the whole file, and an expression may name a step that is only bound later or
deeper; knowing every id up front lets each message say *why* a name is not usable there.
"""

from __future__ import annotations

from dataclasses import dataclass

from procflow.model.reading.reader import IDENT, Reader
from procflow.model.reading.yamlsrc import YMap, YNode, YSeq

RESERVED = ("run", "error", "now")
LOOP_KEYS = ("repeat", "for_each")


@dataclass(frozen=True, slots=True)
class StepId:
    name: str
    line: int
    access: str  # how the binding is reached from the top level: "escalate.nudge"
    owner: str | None  # the id of the step whose scope binds it (None: the top level)
    recover: bool  # a recover step: visible only to the recover steps after it


def step_items(node: YNode | None) -> list[YNode]:
    return node.items if isinstance(node, YSeq) else []


def split_step(item: YNode) -> tuple[str, YNode] | None:
    """``- id: body`` as (id, body); None for anything else (reported by the compiler)."""
    if isinstance(item, YMap) and len(item.entries) == 1:
        entry = next(iter(item.entries.values()))
        if IDENT.match(entry.key):
            return entry.key, entry.value
    return None


def collect_ids(root: YMap, reader: Reader) -> dict[str, StepId]:
    """Every step id of the file; a second use of an id is reported here, once."""
    ids: dict[str, StepId] = {}
    _walk(step_items(root.get("steps")), "", None, False, ids, reader)
    _walk(step_items(root.get("recover")), "", None, True, ids, reader)
    return ids


def _walk(
    items: list[YNode],
    prefix: str,
    owner: str | None,
    recover: bool,
    ids: dict[str, StepId],
    reader: Reader,
) -> None:
    for item in items:
        split = split_step(item)
        if split is None:
            continue
        name, body = split
        assert isinstance(item, YMap)
        key_pos = item.entries[name].key_pos
        if name in ids:
            reader.error(
                key_pos,
                f"step [{name}]",
                f"the id [{name}] is used twice (first at line {ids[name].line}); "
                "step ids are unique in the whole file",
            )
            continue
        ids[name] = StepId(name, key_pos.line, prefix + name, owner, recover)
        if not isinstance(body, YMap):
            continue
        # one iteration's scope is reached by index; [-1] is the example people copy
        inner = (
            f"{prefix}{name}[-1]."
            if any(k in body.entries for k in LOOP_KEYS)
            else (f"{prefix}{name}.")
        )
        _walk(step_items(body.get("steps")), inner, name, False, ids, reader)
        _walk(step_items(body.get("recover")), inner, name, True, ids, reader)
