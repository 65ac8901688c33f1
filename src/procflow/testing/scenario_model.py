"""What a ``*.test.yaml`` file says, once checked: :class:`TestFile` and its :class:`Scenario` list.

The file is read by the model's YAML loader (every node keeps its ``file:line:col``) and checked
the way a definition is: every problem at once, unknown keys with a did-you-mean, nothing run when
anything is wrong (:func:`load_test_file` returns the problems instead of a file).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from procflow.model.ir import Application, Flow, Process
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, YSeq, load_yaml, to_plain
from procflow.model.source import Diagnostic, Diagnostics, Pos, suggest
from procflow.model.validate import load_file
from procflow.testing.project_flows import ProjectFlows
from procflow.testing.scenario_checks import Checker, FakeNames
from procflow.testing.scenario_types import Action, FakeSpec, Scenario, TestFile


@dataclass
class Loaded:
    """A test file or every problem found in it (then nothing of it runs)."""

    file: TestFile | None
    diagnostics: list[Diagnostic]


def load_test_file(path: str) -> Loaded:
    """Read, parse and check ``path`` completely."""
    diags = Diagnostics()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        diags.error(Pos(path, 1, 1, ""), f"cannot read the test file: {exc}")
        return Loaded(None, diags.sorted())
    root = load_yaml(text, path, diags)
    if root is None:
        return Loaded(None, diags.sorted())
    found = _load(root, path, diags)
    if diags.has_errors:
        return Loaded(None, diags.sorted())
    return Loaded(found, diags.sorted())


def _load(root: YNode, path: str, diags: Diagnostics) -> TestFile | None:
    check = Checker(diags)
    top = check.mapping(root, "a test file", ("tests", "process", "fakes", "scenarios"))
    if top is None:
        return None
    check.required(top, ("tests", "scenarios"), "a test file")
    target = _definition(top, path, diags)
    chosen = _process(top, target, diags) if target is not None else None
    names = FakeNames.of(target, chosen) if target is not None and chosen is not None else None
    common = _fakes(check, top.get("fakes"), names)
    scenarios = _scenarios(check, top.get("scenarios"), common, names, chosen)
    if target is None or chosen is None:
        return None
    definition_path = _relative(path, _text(top.get("tests")) or "")
    callees: tuple[str, ...] = ()
    if isinstance(chosen, Flow):
        project = ProjectFlows.around(chosen, definition_path)
        for scenario in scenarios:
            project.check_reachable(diags, chosen, scenario.name, scenario.pos, scenario.fakes)
        callees = project.callees(chosen)
    return TestFile(path, definition_path, target, chosen, scenarios, callees)


def _text(node: YNode | None) -> str | None:
    return node.value if isinstance(node, YScalar) and isinstance(node.value, str) else None


def _relative(test_path: str, target: str) -> str:
    return str(Path(test_path).parent / target)


def _definition(top: YMap, path: str, diags: Diagnostics) -> Application | Flow | None:
    node = top.get("tests")
    target = _text(node)
    if node is None:
        return None
    if target is None:
        diags.error(node.pos, "tests: names the definition file under test, relative to this file")
        return None
    full = _relative(path, target)
    if not Path(full).is_file():
        diags.error(node.pos, f"tests: no definition file [{target}] next to this test file")
        return None
    try:
        loaded = load_file(full)
    except Exception as exc:  # an unusable file (too big, unreadable): one problem, here
        diags.error(node.pos, f"tests: [{target}] cannot be used: {exc}")
        return None
    if not loaded.ok or loaded.definition is None:
        diags.error(node.pos, f"tests: the definition [{target}] is invalid (its problems follow)")
        diags.extend(loaded.diagnostics)
        return None
    return loaded.definition


def _process(
    top: YMap, definition: Application | Flow, diags: Diagnostics
) -> Process | Flow | None:
    node = top.get("process")
    if isinstance(definition, Flow):
        if node is not None:
            diags.error(node.pos, "process: is for intent files; a flow file holds one flow")
        return definition
    name = _text(node)
    if name is not None and node is not None:
        for process in definition.processes:
            if process.name == name:
                return process
        known = [p.name for p in definition.processes]
        diags.error(
            node.pos, f"process: no process [{name}] in the definition{suggest(name, known)}"
        )
        return None
    triggered = [p for p in definition.processes if p.trigger is not None]
    if len(triggered) == 1:
        return triggered[0]
    where = node.pos if node is not None else top.pos
    diags.error(
        where, f"process: the definition has {len(triggered)} triggered processes; name one"
    )
    return None


def _fakes(check: Checker, node: YNode | None, names: FakeNames | None) -> dict[str, FakeSpec]:
    if node is None:
        return {}
    fakes = check.mapping(node, "fakes", None)
    if fakes is None:
        return {}
    found: dict[str, FakeSpec] = {}
    for name, entry in fakes.entries.items():
        if names is not None:
            names.check(check.diags, name, entry.key_pos)
        spec = check.fake(name, entry.value)
        if spec is not None:
            found[name] = FakeSpec(name=name, pos=entry.key_pos, **spec)
    return found


def _scenarios(
    check: Checker,
    node: YNode | None,
    common: dict[str, FakeSpec],
    names: FakeNames | None,
    chosen: Process | Flow | None,
) -> tuple[Scenario, ...]:
    if node is None:
        return ()
    if not isinstance(node, YSeq) or not node.items:
        check.diags.error(node.pos, "scenarios: a non-empty list of scenarios")
        return ()
    found: list[Scenario] = []
    for item in node.items:
        scenario = _scenario(check, item, common, names, chosen)
        if scenario is not None:
            found.append(scenario)
    all_fakes = set(common) | {n for s in found for n in s.fakes}
    for scenario in found:
        for action in scenario.actions:
            if action.kind == "expect" and isinstance(action.value, dict):
                _check_calls(check, action, all_fakes)
    if names is not None and chosen is not None:
        names.require_http_fakes(check.diags, found)
    return tuple(found)


def _check_calls(check: Checker, action: Action, fakes: set[str]) -> None:
    calls = action.value.get("calls")
    if not isinstance(calls, dict):
        return
    for name in calls:
        if name not in fakes:
            check.diags.error(
                action.keys.get("calls", action.pos),
                f"expect.calls: [{name}] is not a fake of this file{suggest(name, sorted(fakes))}",
            )


def _scenario(
    check: Checker,
    node: YNode,
    common: dict[str, FakeSpec],
    names: FakeNames | None,
    chosen: Process | Flow | None,
) -> Scenario | None:
    scenario = check.mapping(node, "a scenario", ("name", "fakes", "given", "do"))
    if scenario is None:
        return None
    check.required(scenario, ("name", "do"), "a scenario")
    name = _text(scenario.get("name"))
    given = check.given(scenario.get("given"), chosen, scenario.pos)
    own = _fakes(check, scenario.get("fakes"), names)
    actions = check.actions(scenario.get("do"))
    if name is None:
        return None
    return Scenario(name, scenario.pos, given, tuple(actions), {**common, **own})


__all__ = ["Loaded", "load_test_file", "to_plain"]
