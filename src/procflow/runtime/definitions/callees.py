"""The deployed definitions a deploy's calls are checked against (docs/reference/cli.md).

A ``call`` names a flow of the files deployed together or one already deployed; the deployed
flow's inputs are those of its latest version (enabled or not: a disabled flow is deployed, and
its runs are refused when a call starts them). A deployed intent process is refused by name. A
flow faked by ``procflow test`` (``CALL_FAKES``) counts as deployed, its inputs unchecked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from procflow.errors import DefinitionError
from procflow.model.flow.calls import Signatures, call_steps
from procflow.model.ir import InputDecl
from procflow.model.validate import Loaded, check_calls_together, flow_of
from procflow.runtime.definitions.catalog import Catalog
from procflow.runtime.interpret.flow_call import CALL_FAKES
from procflow.store.store import Tx

__all__ = ["checked_files", "deployed_signatures"]


def checked_files(catalog: Catalog, files: Sequence[Loaded]) -> list[Loaded]:
    """``files`` with their calls checked across them and the deployed definitions; raises
    :class:`DefinitionError` with every problem of every file that has one.

    Read before the deploy's transaction takes its lock: what is deployed only grows (a name
    keeps its dialect, no flow is removed), so a deploy in between can make no call wrong that
    was right; it can change a called flow's inputs, as any later deploy may."""
    flows = [f for f in map(flow_of, files) if f is not None]
    together = {f.name for f in flows}
    called = {step.flow for f in flows for step in call_steps(f.steps + (f.recover or ()))}
    # A deploy without calls, or calling only flows deployed with it, reads no deployed
    # definition (it counts: 10,000 flows deployed one by one read the list 10,000 times).
    missing = called - together
    deployed, intents = (
        deployed_signatures(catalog, catalog.store.read(), missing) if missing else ({}, set())
    )
    checked = check_calls_together(files, deployed, intents) if called else list(files)
    problems = [d for loaded in checked if not loaded.ok for d in loaded.diagnostics]
    if any(not loaded.ok for loaded in checked):
        raise DefinitionError(problems)
    return checked


def deployed_signatures(
    catalog: Catalog, reader: Tx, called: Iterable[str]
) -> tuple[Signatures, set[str]]:
    """Every deployed flow's name, with the inputs of its latest version for those ``called``
    (the others are only candidates for a did-you-mean), and the deployed intent processes."""
    flows: dict[str, Mapping[str, InputDecl] | None] = {}
    intents: set[str] = set()
    for name, dialect, _enabled, _latest in reader.definitions():
        if dialect == "flow":
            flows[name] = None
        elif "@" not in name:  # not the version anchoring an intent file's entities
            intents.add(name)
    for name in called:
        version = reader.latest_version(name) if name in flows else None
        if version is not None:
            flows[name] = _inputs(catalog, version.id, reader)
    for name in CALL_FAKES:  # `procflow test` fakes it: the call never starts a run of it
        flows.setdefault(name, None)
        intents.discard(name)
    return flows, intents


def _inputs(catalog: Catalog, version_id: int, reader: Tx) -> Mapping[str, InputDecl] | None:
    try:
        return catalog.flow(version_id, reader)[1].inputs
    except DefinitionError:
        # A stored version that no longer compiles here (its connector changed): the name is
        # deployed, its inputs are not known; starting it reports why.
        return None
