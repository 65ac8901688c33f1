#!/usr/bin/env bash
# What `make test` needs from the system besides Python packages: Graphviz's `dot` (the diagram
# tests), Debian's chromium at /usr/bin/chromium (the browser tests; Playwright never downloads a
# browser here), PostgreSQL (every behaviour test runs on it too: one answering at
# 127.0.0.1:5432, or Debian's postgresql package for scripts/ensure-postgres.sh to start a
# throwaway cluster from) and npm (installs bpmn-js, which the BPMN export's tests import into). As root with apt-get, installs what is missing in one go; otherwise
# names the command to run and fails at once, before minutes of tests fail for want of it.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v npm >/dev/null 2>&1 || missing+=(npm)
pg_answers() {
  command -v pg_isready >/dev/null 2>&1 \
    && pg_isready -q -d "${PROCFLOW_TEST_PG:-postgresql://postgres@127.0.0.1:5432/postgres}"
}
if ! pg_answers && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  missing+=(postgresql)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

command="apt-get update && apt-get install -y ${missing[*]}"
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "make test needs ${missing[*]} (Debian packages), and installing them takes root:" >&2
  echo "    sudo sh -c '$command'" >&2
  echo "then run make test again (docs/development.md says what each is for)." >&2
  exit 1
fi
echo "== installing what the tests need: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq "${missing[@]}" >&2
