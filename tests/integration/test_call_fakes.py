"""The runtime's hook for test doubles of called flows (``CALL_FAKES``, what ``procflow test``
installs), on both store backends: a faked call starts no child and binds the double's output;
each attempt is asked with its number and the step's timeout; a failure is a call failure (a
NonRetryableError skips the retries); a virtual ActionTimeout keeps the step waiting until its
timeout runs out on the clock; a detached call goes on whatever the double does."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from procflow.errors import ActionTimeout, NonRetryableError
from procflow.runtime.engine import Engine
from procflow.runtime.interpret.flow_call import CALL_FAKES, CallAsk

PARENT = """\
flow: parent
steps:
  - build:
      call: child
      inputs: { name: acme }
      timeout: 1h
      retry: { count: 1, every: 5m }
  - tell:
      call: child
      detach: true
      inputs: { name: "{{ build.output.name }}" }
output: "{{ build }}"
"""
CHILD = """\
flow: child
inputs:
  name: { type: string, required: true }
steps:
  - made: { set: { name: "{{ name }}" } }
output: { name: "{{ made.name }}" }
"""


@pytest.fixture
def faking() -> Iterator[Callable[[Callable[[CallAsk], Any]], list[CallAsk]]]:
    """Install a double of ``child`` for the test; the calls it was asked, in order."""

    def install(answer: Callable[[CallAsk], Any]) -> list[CallAsk]:
        asked: list[CallAsk] = []

        def double(ask: CallAsk) -> Any:
            asked.append(ask)
            return answer(ask)

        CALL_FAKES["child"] = double
        return asked

    yield install
    CALL_FAKES.pop("child", None)


def _run(eng: Engine, tmp_path: Path) -> str:
    for name, text in (("child", CHILD), ("parent", PARENT)):
        path = tmp_path / f"{name}.flow.yaml"
        path.write_text(text, encoding="utf-8")
        eng.deploy(str(path))
    run_id = eng.start_flow("parent", {})
    eng.work()
    return run_id


def test_a_faked_call_binds_the_output_and_starts_no_child(
    eng: Engine, tmp_path: Path, faking: Callable[..., list[CallAsk]]
) -> None:
    asked = faking(lambda ask: {"name": ask.inputs["name"].upper()})
    shown = eng.show(_run(eng, tmp_path))
    assert shown["status"] == "completed"
    assert shown["output"] == {"run_id": None, "status": "completed", "output": {"name": "ACME"}}
    assert shown["bindings"]["tell"] == {"run_id": None}
    assert [(a.step, a.inputs, a.attempt, a.timeout) for a in asked] == [
        ("build", {"name": "acme"}, 1, 3600.0),
        ("tell", {"name": "ACME"}, 1, None),
    ]
    assert [r.name for r in eng.list_runs()] == ["parent"]
    assert "call.started" not in [h["type"] for h in shown["history"]]


def test_a_failing_double_fails_the_attempt_with_error_type_call(
    eng: Engine, tmp_path: Path, faking: Callable[..., list[CallAsk]]
) -> None:
    def answer(ask: CallAsk) -> Any:
        if ask.step == "build":
            raise RuntimeError(f"quota exceeded on attempt {ask.attempt}")
        return None

    asked = faking(answer)
    run_id = _run(eng, tmp_path)
    eng.advance("5m")
    shown = eng.show(run_id)
    assert shown["status"] == "failed"
    assert shown["error"]["type"] == "call"
    assert shown["error"]["message"] == "quota exceeded on attempt 2"
    assert [a.attempt for a in asked] == [1, 2]


def test_a_non_retryable_failure_skips_the_retry(
    eng: Engine, tmp_path: Path, faking: Callable[..., list[CallAsk]]
) -> None:
    def answer(ask: CallAsk) -> Any:
        raise NonRetryableError("no such tenant")

    asked = faking(answer)
    shown = eng.show(_run(eng, tmp_path))
    assert (shown["status"], shown["error"]["message"], len(asked)) == (
        "failed", "no such tenant", 1,
    )  # fmt: skip


def test_a_virtual_timeout_waits_out_the_steps_timeout_then_retries(
    eng: Engine, tmp_path: Path, faking: Callable[..., list[CallAsk]]
) -> None:
    def answer(ask: CallAsk) -> Any:
        if ask.step == "build" and ask.attempt == 1:
            assert ask.timeout is not None
            raise ActionTimeout("slow", seconds=ask.timeout, step=ask.step, virtual=True)
        return {"name": "late"}

    faking(answer)
    run_id = _run(eng, tmp_path)
    (token,) = eng.show(run_id)["tokens"]
    assert token["waiting_for"]["kind"] == "timer"
    eng.advance("59m")
    assert eng.show(run_id)["status"] == "waiting"
    eng.advance("1m")
    shown = eng.show(run_id)
    failed = [h for h in shown["history"] if h["type"] == "attempt.failed"]
    assert [h["message"] for h in failed] == ["the faked run of child did not end within 1h"]
    eng.advance("5m")
    assert eng.show(run_id)["output"]["output"] == {"name": "late"}


def test_a_detached_call_goes_on_whatever_the_double_does(
    eng: Engine, tmp_path: Path, faking: Callable[..., list[CallAsk]]
) -> None:
    def answer(ask: CallAsk) -> Any:
        if ask.step == "tell":
            raise RuntimeError("the detached child failed")
        return {"name": "acme"}

    faking(answer)
    shown = eng.show(_run(eng, tmp_path))
    assert shown["status"] == "completed"
    assert shown["bindings"]["tell"] == {"run_id": None}
