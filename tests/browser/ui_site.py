"""A procflow store on a virtual clock with a real ``procflow serve`` on it, for the browser tests.

:class:`UiSite` makes the store (``procflow db init --virtual-clock``), drives it with the
``procflow`` command (deploy, records, clock, runs show — the CLI on the same store, as an
operator would) and serves it with :class:`serving.Served`, the subprocess harness of the HTTP
tests (``tests/server/serving.py``, imported, not copied). The helpers below it are what several
browser tests share: waiting for what a worker does, reaching a control with the keyboard alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx
from playwright.sync_api import Locator, Page, ViewportSize
from serving import Served, subprocess_env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PROVISIONING = EXAMPLES / "provisioning" / "app.intent"
ORDERS = EXAMPLES / "orders" / "orders.intent"
ONBOARDING = EXAMPLES / "onboarding" / "onboarding.flow.yaml"
REMINDERS = EXAMPLES / "reminders" / "reminders.flow.yaml"

VIEWPORT: ViewportSize = {
    "width": 1280,
    "height": 800,
}  # the browser window of every test (and screenshot)
CLI_SECONDS = 120.0  # the longest one CLI command may take (a bound, not a target)
WORK_SECONDS = 30.0  # the longest the server's worker may take to reach a state we wait for

T = TypeVar("T")


class UiSite:
    """One virtual-clock store, the CLI on it, and the ``procflow serve`` processes on it."""

    def __init__(self, db_url: str, db_env: Mapping[str, str], folder: Path) -> None:
        self.db_url = db_url
        self.db_env = dict(db_env)
        self.folder = folder
        self.served: list[Served] = []
        self.base_url = ""

    # --- the procflow command ----------------------------------------------------------------

    def cli(
        self, *args: str, check: bool = True, store: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """``procflow ARGS --db URL`` (as the administrator the CLI is; without ``--db`` when not
        ``store``, e.g. ``validate``), its output captured."""
        db = ["--db", self.db_url] if store else []
        done = subprocess.run(
            [sys.executable, "-m", "procflow.cli", *args, *db],
            env=subprocess_env(self.db_env), cwd=self.folder, text=True,
            capture_output=True, timeout=CLI_SECONDS, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(
                f"procflow {' '.join(args)} exited {done.returncode}\n"
                f"stdout: {done.stdout}\nstderr: {done.stderr}"
            )
        return done

    def cli_json(self, *args: str) -> Any:
        return json.loads(self.cli(*args, "--json").stdout)

    def init_store(self) -> None:
        self.cli("db", "init", "--virtual-clock")

    def deploy(self, *paths: Path) -> None:
        self.cli("deploy", *(str(p) for p in paths))

    def create_record(self, entity: str, data: Mapping[str, Any]) -> dict[str, Any]:
        record: dict[str, Any] = self.cli_json(
            "records", "create", entity, "--data", json.dumps(data)
        )
        return record

    def run(self, run_id: str) -> dict[str, Any]:
        shown: dict[str, Any] = self.cli_json("runs", "show", run_id)
        return shown

    def runs(self) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = self.cli_json("runs", "list")
        return listed

    def api_runs(self, query: str = "") -> list[str]:
        """Run ids as ``GET /runs`` lists them (newest first), the order the UI's list follows."""
        answer = httpx.get(self.url(f"/runs?limit=500{query}"), timeout=CLI_SECONDS)
        answer.raise_for_status()
        return [item["id"] for item in answer.json()["items"]]

    def tasks(self) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = self.cli_json("tasks", "list")
        return listed

    def advance(self, duration: str) -> None:
        self.cli("clock", "advance", duration)

    def start_flow(self, name: str, inputs: Mapping[str, Any]) -> str:
        return self.cli("start", name, "--inputs", json.dumps(inputs)).stdout.strip()

    def run_of_record(self, entity: str, record_id: int) -> dict[str, Any]:
        """The run a record's trigger started (waits for the worker to have started it)."""

        def find() -> dict[str, Any] | None:
            for item in self.runs():
                shown = self.run(item["id"])
                if shown["record"] == {"entity": entity, "id": record_id}:
                    return shown
            return None

        return wait_for(find, f"a run for {entity} {record_id}")

    # --- the server ----------------------------------------------------------------------------

    def serve(self, *flags: str, environ: Mapping[str, str] | None = None) -> str:
        """Starts ``procflow serve --port 0 --db URL FLAGS``; its base URL (also ``base_url``)."""
        env = subprocess_env(self.db_env, environ)
        served = Served(["--port", "0", "--db", self.db_url, *flags], env, self.folder)
        self.served.append(served)
        self.base_url = served.wait_serving()
        return self.base_url

    def url(self, path: str) -> str:
        assert self.base_url, "the site is not served yet: call serve() first"
        return f"{self.base_url}{path}"

    def server_output(self) -> str:
        return "\n".join(f"--- serve {s.args}:\n{s.stderr}" for s in self.served)

    def stop(self) -> None:
        for served in self.served:
            try:
                served.stop()
            except subprocess.TimeoutExpired:
                served.kill()


def wait_for(probe: Callable[[], T | None], what: str, seconds: float = WORK_SECONDS) -> T:
    """``probe()`` once it is not None (or False), tried every 0.2 s for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        found = probe()
        if found is not None and found is not False:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds:g} s for {what}")
        time.sleep(0.2)


def wait_run(
    site: UiSite, run_id: str, test: Callable[[dict[str, Any]], bool], what: str
) -> dict[str, Any]:
    """The run once ``test(run)`` holds (the server's worker moves it meanwhile)."""

    def probe() -> dict[str, Any] | None:
        shown = site.run(run_id)
        return shown if test(shown) else None

    return wait_for(probe, f"run {run_id}: {what}")


# --- the keyboard ------------------------------------------------------------------------------

MAX_TABS = 150  # more Tab presses than any page of the contract has focusable controls


def is_focused(target: Locator) -> bool:
    return bool(target.evaluate("element => element === document.activeElement"))


def tab_to(page: Page, target: Locator) -> int:
    """Presses Tab from the top of the page until ``target`` has the focus; how many presses.

    Fails when the control cannot be reached (not focusable, disabled, hidden from the tab order).
    """
    page.evaluate("() => { document.activeElement?.blur(); window.scrollTo(0, 0); }")
    page.keyboard.press("Tab")  # the first press enters the document from the top
    for presses in range(1, MAX_TABS + 1):
        if is_focused(target):
            return presses
        page.keyboard.press("Tab")
    focused = page.evaluate("() => document.activeElement?.outerHTML?.slice(0, 200)")
    raise AssertionError(f"{target} not reached in {MAX_TABS} Tab presses (focus on {focused})")


def press_enter_on(page: Page, target: Locator) -> None:
    """Reaches ``target`` with Tab and presses Enter: the action as a keyboard user does it."""
    tab_to(page, target)
    page.keyboard.press("Enter")


def submit_with_enter(page: Page, button: Locator) -> int:
    """Presses Enter on a form's submit ``button`` (reached with Tab) and waits until the page
    the browser lands on has loaded (after any redirect); the status the POST answered."""
    tab_to(page, button)
    with (
        page.expect_navigation(wait_until="load"),
        page.expect_response(lambda r: r.request.method == "POST") as posted,
    ):
        page.keyboard.press("Enter")
    return posted.value.status


def navigate_with_enter(page: Page, target: Locator) -> None:
    """Presses Enter on a link or a GET form's button (reached with Tab); waits for the new page."""
    tab_to(page, target)
    with page.expect_navigation(wait_until="load"):
        page.keyboard.press("Enter")
