"""The flows a tested flow calls, found in its project: the ``*.flow.yaml`` files below the folder
of the flow under test. Each scenario deploys them (callees first) before the tested flow, so a
called flow without a fake runs for real, as a child run in the scenario's store."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from procflow.model.flow.calls import call_steps
from procflow.model.ir import CallStep, Flow
from procflow.model.source import Diagnostics, Pos
from procflow.model.validate import load_file

FLOW_SUFFIXES = (".flow.yaml", ".flow.yml")
_SKIPPED_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__", ".tox"})


def calls_of(flow: Flow) -> list[CallStep]:
    """``flow``'s call steps, nested and recover ones included."""
    return list(call_steps(flow.steps + (flow.recover or ())))


@dataclass(frozen=True)
class ProjectFlows:
    """The valid flows of a project folder by name, each with the file it is in."""

    folder: str
    flows: Mapping[str, tuple[str, Flow]]

    @classmethod
    def around(cls, tested: Flow, definition_path: str) -> ProjectFlows:
        """The flows next to (and below) ``definition_path``; none are read when ``tested``
        calls no flow."""
        folder = Path(definition_path).parent
        if not calls_of(tested):
            return cls(str(folder), {})
        found: dict[str, tuple[str, Flow]] = {}
        for path in _flow_files(folder):
            loaded = load_file(str(path))
            # An invalid file is `procflow validate`'s to report; here it is no flow to call.
            if loaded.ok and isinstance(loaded.definition, Flow):
                found.setdefault(loaded.definition.name, (str(path), loaded.definition))
        found[tested.name] = (definition_path, tested)  # the tested file, however it is found
        return cls(str(folder), found)

    def callees(self, tested: Flow) -> tuple[str, ...]:
        """The files of the project's flows ``tested`` calls, directly or through them, each
        once, a callee before its caller (the tested flow itself left out)."""
        order: list[str] = []
        seen = {tested.name}

        def visit(flow: Flow) -> None:
            for step in calls_of(flow):
                if step.flow in seen or step.flow not in self.flows:
                    continue
                seen.add(step.flow)
                path, callee = self.flows[step.flow]
                visit(callee)
                order.append(path)

        visit(tested)
        return tuple(order)

    def check_reachable(
        self, diags: Diagnostics, tested: Flow, scenario: str, pos: Pos, fakes: Collection[str]
    ) -> None:
        """A called flow that is neither faked nor in the project could never start in the
        scenario's fresh store: a problem of the test file, not a surprise at run time."""
        for via, caller, step in self._unfaked_calls(tested, fakes):
            if step.flow in self.flows:
                continue
            if caller == tested.name:
                where, fix = "", f"`fakes: {{ {step.flow}: {{ returns: ... }} }}`"
            else:
                where, fix = f" (of the called flow [{caller}])", f"a fake of [{via}]"
            diags.error(
                pos,
                f"scenario [{scenario}]: step [{step.id}]{where} calls flow [{step.flow}], which "
                f"is not a flow of this project ({self.folder}); add its file or {fix}",
            )

    def _unfaked_calls(
        self, tested: Flow, fakes: Collection[str]
    ) -> Iterator[tuple[str, str, CallStep]]:
        """Every call step that would start a real child: the flow ``tested`` calls it through,
        the flow it is in, the step."""
        for first in calls_of(tested):
            if first.flow in fakes:
                continue
            yield first.flow, tested.name, first
            seen = {tested.name, first.flow}
            todo = [self.flows[first.flow][1]] if first.flow in self.flows else []
            while todo:
                flow = todo.pop()
                for step in calls_of(flow):
                    yield first.flow, flow.name, step
                    if step.flow in self.flows and step.flow not in seen:
                        seen.add(step.flow)
                        todo.append(self.flows[step.flow][1])


def _flow_files(folder: Path) -> Iterator[Path]:
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(files):
            if name.endswith(FLOW_SUFFIXES):
                yield Path(root) / name
