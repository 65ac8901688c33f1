# procflow: `make demo` runs the main job, `make test` runs everything CI runs.
# Both create .venv and install the package with pinned dependencies when needed: the demo the
# core package alone, the tests the development extras too (and, through scripts/ensure-system.sh,
# the Debian packages the suite drives: Graphviz, chromium, PostgreSQL, npm for bpmn-js).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CORE   := $(VENV)/.installed-core
STAMP  := $(VENV)/.installed
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt

.PHONY: demo test system lint typecheck pytest bench chaos clean

$(VENV)/bin/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "procflow needs Python 3.11+"'
	@$(PYTHON) -m venv $(VENV) || { echo "python3 -m venv failed: on Debian, apt-get install python3-venv" >&2; exit 1; }

$(CORE): pyproject.toml constraints.txt | $(VENV)/bin/python
	$(PIP) -e .
	touch $(CORE)

$(STAMP): pyproject.toml constraints.txt | $(VENV)/bin/python
	$(PIP) -e '.[dev]'
	touch $(STAMP) $(CORE)

DEMO_DB := sqlite:///.demo/demo.db
DEMO_ACCOUNTS := {"accounts": [{"name": "Acme", "owner": "@ada", "renews": "2027-02-01"}, {"name": "Globex", "owner": "@bob", "renews": "2027-03-15"}]}

# The main job: three tenants through examples/provisioning on a virtual clock (seconds, not
# minutes): one clean, one flaky that recovers by retry, one refused that lands in Failed.
demo: $(CORE)
	$(BIN)/procflow validate examples
	rm -rf .demo && mkdir -p .demo
	$(BIN)/procflow db init --virtual-clock --db $(DEMO_DB)
	@echo "== tenant 'acme': clean"
	$(BIN)/procflow run examples/provisioning/app.intent --db $(DEMO_DB) --wait --record '{"title": "acme"}'
	@echo "== tenant 'globex flaky-2': the schema service fails twice, retry recovers"
	$(BIN)/procflow run examples/provisioning/app.intent --db $(DEMO_DB) --wait --record '{"title": "globex flaky-2"}'
	@echo "== tenant 'initech refused': the app refuses, retries run out, onError records it"
	$(BIN)/procflow run examples/provisioning/app.intent --db $(DEMO_DB) --wait --record '{"title": "initech refused"}'
	@echo "== the tenants' records afterwards (ProvisioningStatus 1 = Requested, 3 = Failed)"
	$(BIN)/procflow records list TenantApplication --db $(DEMO_DB)
	@echo "== a flow: remind two account owners on Slack, wait a day, report by e-mail (outbox mode)"
	$(BIN)/procflow run examples/reminders/reminders.flow.yaml --db $(DEMO_DB) --wait --inputs '$(DEMO_ACCOUNTS)'
	@echo "== the outbox: the flow's messages, and operations told of the failed tenant by the 08:00 sweep (schedules:) of examples/provisioning"
	$(BIN)/procflow outbox list --db $(DEMO_DB)
	$(BIN)/procflow clock show --db $(DEMO_DB)

# Graphviz, chromium and PostgreSQL: installed with apt-get when missing (as root), else the
# command to run is named within seconds.
system:
	@scripts/ensure-system.sh

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy --strict src

# bpmn-js from npm, test-only (tests/browser/bpmn_js.py): the BPMN export must import into it
# without a warning. The lock file pins every package and its hash.
BPMN_JS := tests/browser/bpmn-js/node_modules/bpmn-js/dist/bpmn-modeler.production.min.js
$(BPMN_JS): tests/browser/bpmn-js/package-lock.json | system
	npm ci --no-audit --no-fund --prefix tests/browser/bpmn-js
	touch $(BPMN_JS)

# Four processes (pytest-xdist) on 2 cores: a test mostly waits on a procflow process, the
# database or chromium (docs/development.md has the figures).
pytest: $(STAMP) system $(BPMN_JS)
	@# Bytecode for every module, written even where PYTHONDONTWRITEBYTECODE is set: the suite
	@# starts some thousands of procflow processes, which would otherwise each compile the
	@# modules no earlier process left bytecode for (some 10 % of a command's start-up).
	$(BIN)/python -m compileall -q src >/dev/null
	@# The PostgreSQL of this machine when it answers, else a throwaway cluster (started once here,
	@# not by each test process).
	PROCFLOW_TEST_PG="$$(scripts/ensure-postgres.sh)" $(BIN)/pytest -n 4 --dist worksteal

test: system lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python bench/validate_large.py
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/scaleout.py
	$(BIN)/python bench/wakeup.py
	$(BIN)/python bench/flow_foreach.py
	$(BIN)/python bench/flow_timers.py
	$(BIN)/python bench/event_scale.py
	$(BIN)/python bench/http.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/ui.py
	$(BIN)/python bench/scenarios.py
	$(BIN)/python bench/schedules.py
	$(BIN)/python bench/calls.py
	$(BIN)/python bench/flow_control.py

# 4 workers on PostgreSQL advance 1,000 runs while a driver SIGKILLs one every ~200 ms; then 50
# parents calling a child each, a worker SIGKILLed at each point of starting, ending and waking;
# then flow control: for 30 s two processes start runs of a limited flow and one cancels them
# while 4 workers, SIGKILLed every ~300 ms, end them; the limit and the queue are checked from
# history.
chaos: $(STAMP)
	PROCFLOW_CHAOS_RUNS=1000 $(BIN)/pytest -s tests/faults/test_chaos.py
	PROCFLOW_CALL_CRASH_PARENTS=50 $(BIN)/pytest tests/faults/test_call_crash.py
	PROCFLOW_CHAOS_FC_SECONDS=30 $(BIN)/pytest -s tests/faults/test_flow_control_chaos.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .demo
