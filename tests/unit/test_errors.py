"""The one exception tree (procflow/errors.py): its shape, its exit codes, and the attributes real
raise sites set (through the Python API, on both store backends). That no public exception lives
elsewhere, and that errors.py imports nothing of procflow, is checked by test_architecture.py."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import procflow
from procflow import errors
from procflow.errors import (
    BadDefinitionError,
    ContractError,
    DefinitionError,
    DeployError,
    EventError,
    InputError,
    NotFoundError,
    ProcflowError,
    RecordError,
    RunStateError,
    TaskError,
    UsageError,
)
from procflow.testing import fake_delegate


def _error_classes() -> list[type[ProcflowError]]:
    return [
        c
        for _, c in inspect.getmembers(errors, inspect.isclass)
        if c.__module__ == errors.__name__ and issubclass(c, BaseException)
    ]


# --- the tree --------------------------------------------------------------------------------


def test_every_class_of_errors_py_is_a_procflow_error() -> None:
    defined = [
        c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__
    ]
    not_errors = [c.__name__ for c in defined if not issubclass(c, ProcflowError)]
    assert not_errors == ["DiagnosticLike"]  # the protocol DefinitionError types diagnostics by
    assert len(_error_classes()) == len(defined) - 1


def test_the_module_docstring_draws_every_class_under_its_base() -> None:
    doc = errors.__doc__ or ""
    parents: dict[str, str | None] = {}
    open_at: list[tuple[int, str]] = []  # (indent, name) of the lines above, one per depth
    for line in doc.splitlines():
        if not line.startswith("    "):
            continue
        indent, name = len(line) - len(line.lstrip()), line.split()[0]
        open_at = [(i, n) for i, n in open_at if i < indent]
        parents[name] = open_at[-1][1] if open_at else None
        open_at.append((indent, name))
    classes = {c.__name__: c for c in _error_classes()}
    assert set(parents) == set(classes)
    for name, parent in parents.items():
        base = classes[name].__bases__[0]
        assert parent == (None if base is Exception else base.__name__), name


def test_exit_codes_one_for_a_bad_definition_or_run_two_for_an_unusable_request() -> None:
    for cls in _error_classes():
        assert cls.exit_code == (2 if issubclass(cls, UsageError) else 1), cls.__name__
    assert ProcflowError.exit_code == 1
    assert BadDefinitionError.exit_code == DefinitionError.exit_code == DeployError.exit_code == 1
    assert not issubclass(DeployError, UsageError)  # a bad definition, not a bad request
    for cls in (InputError, RecordError, EventError, TaskError, NotFoundError):
        assert cls.exit_code == 2


# --- attributes set by real raise sites ------------------------------------------------------

APP = """\
name: {name}
entities:
  - name: {entity}
    fields:
      - {{ name: id, type: integer, primaryKey: true, generated: true }}
      - {{ name: title, type: string, required: true, length: 50 }}
      - {{ name: outcome, type: string, length: 20 }}
forms:
  - {{ name: Review, forEntity: {entity}, fields: [outcome], actions: [approve, reject] }}
"""

PROCESSES = """\
processes:
  - name: Check
    trigger: { onCreate: Claim }
    vars: [{ name: result }]
    steps:
      - name: work
        kind: serviceTask
        args: { delegate: Worker, produces: [result] }
      - name: review
        kind: userTask
        args: { assignee: clerk, form: Review }
      - { name: done, kind: end }
"""

FLOW = """\
flow: greet
inputs:
  n: { type: integer, required: true }
steps:
  - echo: { set: { n: "{{ n }}" } }
"""


@pytest.fixture
def engine(engine: procflow.Engine, db_url: str) -> Iterator[procflow.Engine]:
    """procflow.testing's fixture on SQLite; a virtual-clock engine on the test's PostgreSQL."""
    if db_url.startswith("sqlite"):
        yield engine
        return
    eng = procflow.Engine.virtual(db_url)
    try:
        yield eng
    finally:
        eng.close()


def _write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def _claims(engine: procflow.Engine, tmp_path: Path, processes: str = "") -> None:
    (tmp_path / "custom").mkdir(exist_ok=True)
    (tmp_path / "custom" / "__init__.py").write_text("def Worker(ctx):\n    pass\n")
    engine.deploy(
        _write(tmp_path / "claims.intent", APP.format(name="claims", entity="Claim") + processes)
    )


def test_a_record_write_of_an_unknown_field_names_entity_and_field(
    engine: procflow.Engine, tmp_path: Path
) -> None:
    _claims(engine, tmp_path)
    with pytest.raises(RecordError) as caught:
        engine.records.create("Claim", {"title": "t", "colour": "red"})
    assert (caught.value.entity, caught.value.field, caught.value.record_id) == (
        "Claim", "colour", None,
    )  # fmt: skip
    assert str(caught.value).startswith("cannot create [Claim] record: [colour]: ")
    record = engine.records.create("Claim", {"title": "t"})
    with pytest.raises(RecordError) as caught:
        engine.records.update("Claim", record["id"], {"title": None})
    assert (caught.value.entity, caught.value.field, caught.value.record_id) == (
        "Claim", "title", record["id"],
    )  # fmt: skip
    assert str(caught.value) == (
        "cannot update [Claim] record: [title]: is required and cannot be set to null"
    )


def test_a_bad_flow_input_names_the_input(engine: procflow.Engine, tmp_path: Path) -> None:
    engine.deploy(_write(tmp_path / "greet.flow.yaml", FLOW))
    with pytest.raises(InputError) as caught:
        engine.runs.start("greet", {"n": "three"})
    error = caught.value
    assert (error.flow, error.input, error.field, error.exit_code) == ("greet", "n", "n", 2)
    assert str(error) == 'flow [greet]: input [n] must be an integer, got a string ("three")'
    with pytest.raises(InputError) as caught:
        engine.runs.start("greet", {"typo": 1, "n": "three"})
    assert caught.value.input == "typo"  # the first problem's input: unknown ones come first


def test_deploying_an_entity_another_file_owns_is_a_bad_definition(
    engine: procflow.Engine, tmp_path: Path
) -> None:
    engine.deploy(_write(tmp_path / "a.intent", APP.format(name="first", entity="Shared")))
    with pytest.raises(DeployError) as caught:
        engine.deploy(_write(tmp_path / "b.intent", APP.format(name="second", entity="Shared")))
    error = caught.value
    assert (error.definition, error.entity, error.exit_code) == ("second", "Shared", 1)
    assert not isinstance(error, UsageError)
    assert str(error) == (
        "entity [Shared] is already declared by the deployed file [first]; "
        "two files cannot declare the same entity"
    )


def test_an_incompatible_redeploy_names_definition_and_entity(
    engine: procflow.Engine, tmp_path: Path
) -> None:
    path = tmp_path / "a.intent"
    engine.deploy(_write(path, APP.format(name="first", entity="Shared")))
    changed = APP.format(name="first", entity="Shared").replace(
        "type: string, length: 20", "type: integer"
    )
    with pytest.raises(DeployError) as caught:
        engine.deploy(_write(path, changed))
    assert (caught.value.definition, caught.value.entity) == ("first", "Shared")
    assert "field [outcome] changed type from string to integer" in str(caught.value)


def test_an_invalid_file_is_a_definition_error_with_its_diagnostics(
    engine: procflow.Engine, tmp_path: Path
) -> None:
    with pytest.raises(DefinitionError) as caught:
        engine.deploy(_write(tmp_path / "bad.flow.yaml", "flow: bad\nsteps: 3\n"))
    error = caught.value
    assert error.exit_code == 1 and error.diagnostics
    assert str(error).startswith(error.diagnostics[0].format())
    assert error.diagnostics[0].as_json()["severity"] == "error"


def test_an_unknown_run_id_is_not_found_with_kind_and_key(engine: procflow.Engine) -> None:
    for call in (engine.runs.show, engine.runs.cancel, engine.runs.retry):
        with pytest.raises(NotFoundError) as caught:
            call("no-such-run")
        assert (caught.value.kind, caught.value.key) == ("run", "no-such-run")


def test_a_run_whose_status_forbids_the_request_says_so_with_its_status(
    engine: procflow.Engine, tmp_path: Path
) -> None:
    flow = _write(tmp_path / "done.flow.yaml", "flow: done\nsteps:\n  - s: { set: { x: 1 } }\n")
    engine.deploy(flow)
    run_id = engine.runs.start("done")
    engine.work()
    with pytest.raises(RunStateError) as cancelled:
        engine.runs.cancel(run_id)
    with pytest.raises(RunStateError) as retried:
        engine.runs.retry(run_id)
    for caught in (cancelled, retried):
        assert (caught.value.run_id, caught.value.status, caught.value.exit_code) == (
            run_id, "completed", 2,
        )  # fmt: skip
    assert str(retried.value) == (f"run [{run_id}] is completed; only a failed run can be retried")


def test_an_unknown_definition_or_record_is_not_found_with_kind_and_key(
    engine: procflow.Engine,
) -> None:
    with pytest.raises(NotFoundError) as caught:
        engine.runs.start("nothing-deployed")
    assert (caught.value.kind, caught.value.key) == ("definition", "nothing-deployed")


def test_an_unknown_task_id_is_not_found_with_kind_and_key(engine: procflow.Engine) -> None:
    with pytest.raises(NotFoundError) as caught:
        engine.tasks.complete(404)
    assert (caught.value.kind, caught.value.key, caught.value.exit_code) == ("task", 404, 2)
    assert str(caught.value) == "no task with id [404]"


def test_contract_and_task_errors_name_run_step_and_field(
    engine: procflow.Engine, tmp_path: Path
) -> None:
    _claims(engine, tmp_path, PROCESSES)
    seen: list[ContractError] = []

    def worker(ctx: Any) -> None:
        ctx.vars["result"] = 1
        try:
            ctx.vars["secretSauce"]
        except ContractError as exc:
            seen.append(exc)
            raise

    with fake_delegate("custom.Worker", worker):
        record = engine.records.create("Claim", {"title": "t"})
        engine.work()
    [run] = engine.runs.for_record("Claim", record["id"])
    [breach] = seen
    assert (breach.run_id, breach.step, breach.var) == (run["id"], "work", "secretSauce")
    assert str(breach) == (
        "step [work] read var [secretSauce], which it neither uses nor produces; "
        "add it to uses: in the definition"
    )
    assert breach.exit_code == 1 and not isinstance(breach, UsageError)


def test_a_task_completed_with_a_field_outside_its_form_names_the_field(
    engine: procflow.Engine, tmp_path: Path
) -> None:
    _claims(engine, tmp_path, PROCESSES)
    with fake_delegate("custom.Worker", lambda ctx: ctx.vars.__setitem__("result", 1)):
        record = engine.records.create("Claim", {"title": "t"})
        engine.work()
    [task] = engine.tasks.list()
    with pytest.raises(TaskError) as caught:
        engine.tasks.complete(task["id"], "approve", {"title": "x"})
    error = caught.value
    assert (error.task_id, error.run_id, error.step, error.field) == (
        task["id"], task["run_id"], "review", "title",
    )  # fmt: skip
    assert str(error).startswith(f"task [{task['id']}]: field [title] is not in form [Review]")
    with pytest.raises(TaskError) as caught:
        engine.tasks.complete(task["id"], "maybe")
    assert caught.value.field == "action"
    engine.tasks.complete(task["id"], "approve", {"outcome": "ok"})
    with pytest.raises(TaskError) as caught:
        engine.tasks.complete(task["id"], "approve")
    assert (caught.value.task_id, caught.value.field) == (task["id"], None)
    assert str(caught.value) == (
        f"task [{task['id']}] is completed, not open; only an open task completes"
    )
    assert engine.records.get("Claim", record["id"])["outcome"] == "ok"


def test_a_bad_event_names_its_type_and_field(engine: procflow.Engine) -> None:
    with pytest.raises(EventError) as caught:
        engine.events.send("slack.approval", [1, 2])
    error = caught.value
    assert (error.event_type, error.field, error.exit_code) == ("slack.approval", "data", 2)
    assert str(error) == "event [slack.approval]: data must be a JSON object, got list"
    with pytest.raises(EventError) as caught:
        engine.events.send("slack.approval", {}, "")
    assert (caught.value.event_type, caught.value.field) == ("slack.approval", "id")
