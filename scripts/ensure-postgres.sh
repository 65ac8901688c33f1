#!/usr/bin/env bash
# Make a PostgreSQL answer at $PROCFLOW_TEST_PG (default postgresql://postgres@127.0.0.1:5432/postgres):
# use the one already running when it answers, otherwise start a throwaway cluster from Debian's
# postgresql package in a temporary folder (trust auth, loopback only). Prints the URL to use.
set -euo pipefail
url="${PROCFLOW_TEST_PG:-postgresql://postgres@127.0.0.1:5432/postgres}"
answers() { command -v pg_isready >/dev/null && pg_isready -q -d "$1"; }

if answers "$url"; then echo "$url"; exit 0; fi
port=54329
throwaway="postgresql://postgres@127.0.0.1:$port/postgres"
if answers "$throwaway"; then echo "$throwaway"; exit 0; fi  # started by an earlier run

if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
fi
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
dir=$(mktemp -d /tmp/procflow-pg.XXXXXX)
chown postgres "$dir" 2>/dev/null || true
run() { if [ "$(id -u)" = 0 ]; then su postgres -c "$*"; else sh -c "$*"; fi; }
run "$bin/initdb -D $dir/data -U postgres -A trust" >&2
run "$bin/pg_ctl -D $dir/data -o '-p $port -k $dir -c listen_addresses=127.0.0.1' -l $dir/log -w start" >&2
url="$throwaway"
answers "$url" || { echo "could not start a throwaway PostgreSQL (see $dir/log)" >&2; exit 1; }
echo "$url"
