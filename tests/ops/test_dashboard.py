"""The Grafana dashboard shipped in docs/operations is valid JSON and charts only families that
procflow serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "operations" / "grafana-dashboard.json"
FAMILIES = {
    "procflow_runs",
    "procflow_runs_waiting",
    "procflow_tasks_open",
    "procflow_oldest_due_seconds",
    "procflow_store_up",
    "procflow_step_attempts_total",
    "procflow_step_duration_seconds_bucket",
    "procflow_runs_finished_total",
    "procflow_schedule_slots_total",
    "procflow_schedule_lag_seconds_bucket",
}


def test_every_panel_charts_served_families() -> None:
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    charted: set[str] = set()
    for panel in board["panels"]:
        assert panel["title"] and panel["targets"], panel
        for target in panel["targets"]:
            names = set(re.findall(r"\bprocflow_[a-z_]+", target["expr"]))
            assert names and names <= FAMILIES, (panel["title"], names - FAMILIES)
            charted |= names
    assert charted == FAMILIES  # and each family has a panel
