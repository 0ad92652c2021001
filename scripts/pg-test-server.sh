#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the PostgreSQL tests (DESIGN section 9). Installs nothing:
# it needs the server binaries (Debian's postgresql-15, or PG_BIN=/path/to/bin).
#
#   eval "$(bash scripts/pg-test-server.sh start)"   # prints export TEST_DATABASE_URL=... and PG_TEST_DIR=...
#   bash scripts/pg-test-server.sh stop [DIR]          # DIR defaults to $PG_TEST_DIR
#
# `start` runs initdb into a new temporary folder (as the postgres user when run as root:
# initdb refuses root), trust authentication for local connections only, listening on
# 127.0.0.1 at a private port (PG_TEST_PORT, default 55432, or the next free one above it) and
# on a socket folder inside that temporary folder, so it meets no other server on the machine.
# fsync is off: the cluster is thrown away, its durability is not what the tests test.
# PG_TEST_DURABLE=1 leaves fsync and full_page_writes on (the server's defaults), for figures
# that count what a durable commit costs (`npm run bench -- --postgres`).
# `stop` stops it and removes the folder. Only the two export lines go to stdout.
set -euo pipefail

log() { echo "pg-test-server: $*" >&2; }

bin=${PG_BIN:-}
if [ -z "$bin" ]; then
  for d in /usr/lib/postgresql/15/bin $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
    if [ -x "$d/initdb" ]; then bin=$d; break; fi
  done
fi
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  log "no PostgreSQL server binaries (initdb) found; install postgresql-15 or set PG_BIN"
  exit 1
fi

# as root, run the server's programs as the postgres user; otherwise as whoever runs this
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  local port=${PG_TEST_PORT:-}
  if [ -z "$port" ]; then
    port=55432
    while ! port_free "$port"; do
      port=$((port + 1))
      if [ "$port" -gt 55531 ]; then log "no free port in 55432-55531"; exit 1; fi
    done
  elif ! port_free "$port"; then
    log "port $port is in use"
    exit 1
  fi
  local durability="-c fsync=off -c full_page_writes=off"
  if [ "${PG_TEST_DURABLE:-}" = 1 ]; then durability=""; fi
  local dir
  dir=$(mktemp -d -t cad-pg-test-XXXXXX)
  # the marker `stop` looks for before it removes anything
  touch "$dir/.cad-pg-test-server"
  mkdir "$dir/socket"
  if [ "$(id -u)" = 0 ]; then chown -R postgres:postgres "$dir"; fi
  as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    rm -rf "$dir"
    log "initdb failed"
    exit 1
  }
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 start \
    -o "-p $port -k $dir/socket -c listen_addresses=127.0.0.1 $durability -c max_connections=300" >/dev/null || {
    cat "$dir/server.log" >&2 || true
    rm -rf "$dir"
    log "the server did not start"
    exit 1
  }
  log "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, data in $dir"
  echo "export PG_TEST_DIR=$dir"
  echo "export TEST_DATABASE_URL=postgres://postgres@127.0.0.1:$port/postgres"
}

stop() {
  local dir=${1:-${PG_TEST_DIR:-}}
  if [ -z "$dir" ]; then log "stop: which folder? (argument or PG_TEST_DIR)"; exit 1; fi
  if [ ! -e "$dir/.cad-pg-test-server" ]; then log "stop: $dir is not a folder this script made"; exit 1; fi
  if [ -e "$dir/data/postmaster.pid" ]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -w -t 30 -m fast stop >/dev/null || log "stop: pg_ctl stop failed"
  fi
  rm -rf "$dir"
  log "stopped; removed $dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  *)
    echo "usage: $0 start|stop [DIR]" >&2
    exit 2
    ;;
esac
