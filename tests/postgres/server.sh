#!/usr/bin/env bash
# A throwaway PostgreSQL for the tests, from Debian's packages: `start` makes and starts one on
# 127.0.0.1 (installing `postgresql` when the machine lacks it) and prints its URL; `stop` stops
# it and removes its data; `crash` stops it as a crash would and keeps the data (`start` again
# recovers it); `url` prints the URL of the one running. CHRONICLE_PG_PORT and CHRONICLE_PG_DIR
# choose another server than the shared one. No Docker, nothing fetched
# at run time beyond Debian's package.
#
# The cluster lives in a temporary directory owned by the user that runs the server (`postgres`
# when this runs as root, since initdb refuses root). `start` is idempotent: a server already
# running on the port is reused. Settings: PostgreSQL's defaults (fsync on: the crash tests need what
# a real server does; set on no command line, so a test may change it), trust authentication on
# loopback only.
set -euo pipefail

PORT="${CHRONICLE_PG_PORT:-54329}"
BASE="${CHRONICLE_PG_DIR:-${TMPDIR:-/tmp}/chronicle-pg-$(id -u)-$PORT}"
DATA="$BASE/data"
LOG="$BASE/server.log"
URL="postgres://postgres@127.0.0.1:$PORT/postgres"

bin_dir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  [ -n "$d" ] && [ -x "$d/initdb" ] && echo "$d"
}

install_postgres() {
  echo "postgres: installing Debian's postgresql" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
}

# Runs a command as the server's user.
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

running() {
  local bin
  bin=$(bin_dir) || return 1
  [ -f "$DATA/postmaster.pid" ] && as_owner "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

start() {
  local bin
  bin=$(bin_dir) || { install_postgres; bin=$(bin_dir); } || {
    echo "postgres: no initdb under /usr/lib/postgresql after installing" >&2
    exit 1
  }
  if running; then
    echo "$URL"
    return
  fi
  mkdir -p "$BASE"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$BASE"; fi
  if [ ! -f "$DATA/PG_VERSION" ]; then
    rm -rf "$DATA"
    as_owner "$bin/initdb" -D "$DATA" -U postgres -A trust --no-sync -E UTF8 --locale=C.UTF-8 \
      >"$BASE/initdb.log" 2>&1 || { cat "$BASE/initdb.log" >&2; exit 1; }
  fi
  as_owner "$bin/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start -o \
    "-c listen_addresses=127.0.0.1 -p $PORT -k $BASE -c max_connections=300 \
     -c shared_buffers=128MB -c log_min_messages=warning" >/dev/null \
    || { tail -20 "$LOG" >&2; exit 1; }
  echo "$URL"
}

# Stops the server at once, as a crash would (`pg_ctl stop -m immediate`: no checkpoint, crash
# recovery at the next start); the data stays.
crash() {
  local bin
  bin=$(bin_dir) || return 0
  if running; then
    as_owner "$bin/pg_ctl" -D "$DATA" -m immediate -w stop >/dev/null
  fi
}

stop() {
  local bin
  bin=$(bin_dir) || return 0
  if running; then
    as_owner "$bin/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null || true
  fi
  rm -rf "$BASE"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  crash) crash ;;
  url) running && echo "$URL" ;;
  *) echo "usage: $0 start|stop|crash|url" >&2; exit 2 ;;
esac
