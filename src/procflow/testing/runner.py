"""Finding test files, running their scenarios (in parallel processes when there are many), and
the coverage they add up to: what ``procflow test`` and :func:`run_scenarios` share."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from procflow.errors import UsageError
from procflow.model.source import Diagnostic
from procflow.testing.actions import run_scenario
from procflow.testing.coverage import Coverage, coverage_of
from procflow.testing.expectations import Failure
from procflow.testing.scenario_model import load_test_file
from procflow.testing.scenario_types import TestFile

SUFFIX = ".test.yaml"
PARALLEL_FROM = 24  # fewer scenarios run faster in this process than a pool takes to start
_SKIPPED_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__", ".tox"})


@dataclass
class Result:
    """One scenario's result (``--json`` prints :meth:`as_json`)."""

    file: str
    line: int
    name: str
    status: Literal["pass", "fail"]
    failure: Failure | None
    definition: str = ""
    steps: set[str] = field(default_factory=set)
    routes: set[tuple[str, str]] = field(default_factory=set)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def as_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "name": self.name,
            "status": self.status,
            "failure": self.failure.as_json() if self.failure is not None else None,
        }


@dataclass
class Suite:
    """Everything one ``procflow test`` found and ran."""

    results: list[Result]
    coverage: list[Coverage]
    problems: list[Diagnostic]  # non-empty: some file is unusable, and nothing ran

    @property
    def ok(self) -> bool:
        return not self.problems and all(r.passed for r in self.results)


def find_test_files(paths: Sequence[str]) -> list[str]:
    """``*.test.yaml`` files: the ones named, and those below each folder named (default ``.``)."""
    found: list[str] = []
    for given in paths or ["."]:
        path = Path(given)
        try:
            is_folder, is_file = path.is_dir(), path.is_file()
        except OSError as exc:  # a name the system cannot look up (too long, say)
            raise UsageError(f"cannot look up [{given}]: {exc.strerror or exc}") from None
        if is_folder:
            found += [str(p) for p in _below(path)]
        elif is_file:
            found.append(str(path))
        else:
            raise UsageError(f"no test file or folder [{given}]")
    if not found:  # a CI job pointed at the wrong folder must not pass by running nothing
        raise UsageError(f"no *{SUFFIX} files in {', '.join(paths) or 'this folder'}")
    return list(dict.fromkeys(found))


def _below(folder: Path) -> Iterable[Path]:
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(files):
            if name.endswith(SUFFIX):
                yield Path(root) / name


def load_all(files: Sequence[str]) -> tuple[list[TestFile], list[Diagnostic]]:
    """Every file checked; the problems of all of them (then none may run)."""
    loaded: list[TestFile] = []
    problems: list[Diagnostic] = []
    for path in files:
        found = _load(path)
        problems += [d for d in found.diagnostics if d.severity == "error"]
        if found.file is not None:
            loaded.append(found.file)
    return loaded, problems


def _load(path: str) -> Any:
    """The checked file, read once per version of it in this process (a pool's worker reads
    each file once, not once per scenario)."""
    stat = Path(path).stat()
    return _load_version(path, stat.st_mtime_ns, stat.st_size)


@cache
def _load_version(path: str, _mtime: int, _size: int) -> Any:
    return load_test_file(path)


def run_suite(
    paths: Sequence[str], *, name: str | None = None, workers: int | None = None
) -> Suite:
    """Load every test file below ``paths``; when all are usable, run the scenarios whose name
    contains ``name``, and add up each definition's coverage."""
    files = find_test_files(paths)
    tests, problems = load_all(files)
    if problems:
        return Suite([], [], problems)
    jobs = [
        (test.path, index)
        for test in tests
        for index, scenario in enumerate(test.scenarios)
        if name is None or name in scenario.name
    ]
    results = run_jobs(jobs, workers)
    return Suite(results, _coverage(tests, results), [])


def run_jobs(jobs: list[tuple[str, int]], workers: int | None) -> list[Result]:
    count = workers if workers is not None else _default_workers(len(jobs))
    if count <= 1 or len(jobs) <= 1:
        return [run_job(job) for job in jobs]
    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
    with ProcessPoolExecutor(max_workers=count, mp_context=context) as pool:
        return list(pool.map(run_job, jobs, chunksize=max(1, len(jobs) // (count * 4))))


def _default_workers(jobs: int) -> int:
    if jobs < PARALLEL_FROM:
        return 1
    return max(1, min(os.cpu_count() or 1, 8))


def run_job(job: tuple[str, int]) -> Result:
    """Run scenario ``index`` of the test file ``path`` (in this process or a pool's)."""
    path, index = job
    test = _load(path).file
    assert test is not None  # checked before any job was made
    scenario = test.scenarios[index]
    began = time.perf_counter()
    outcome = run_scenario(test, scenario)
    return Result(
        file=test.path,
        line=scenario.pos.line,
        name=scenario.name,
        status="pass" if outcome.failure is None else "fail",
        failure=outcome.failure,
        definition=test.definition_path,
        steps=outcome.steps,
        routes=outcome.routes,
        seconds=time.perf_counter() - began,
    )


def _coverage(tests: Sequence[TestFile], results: Sequence[Result]) -> list[Coverage]:
    by_definition: dict[tuple[str, str], Coverage] = {}
    for test in tests:
        key = (str(Path(test.definition_path).resolve()), test.process.name)
        if key not in by_definition:
            by_definition[key] = coverage_of(_shown(test.definition_path), test.process)
    for result in results:
        test = _load(result.file).file
        key = (str(Path(test.definition_path).resolve()), test.process.name)
        by_definition[key].add(result.steps, result.routes)
    return list(by_definition.values())


def _shown(path: str) -> str:
    """A path as the user would write it: relative to here when it is below here."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


def run_scenarios(path: str | Sequence[str] = ".", *, name: str | None = None) -> list[Result]:
    """What ``procflow test PATH`` runs, for Python: one :class:`Result` per scenario. An unusable
    test file raises :class:`~procflow.errors.DefinitionError` with every problem (nothing runs)."""
    from procflow.errors import DefinitionError

    suite = run_suite([path] if isinstance(path, str) else list(path), name=name)
    if suite.problems:
        raise DefinitionError(suite.problems)
    return suite.results
