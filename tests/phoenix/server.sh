#!/usr/bin/env bash
# A throwaway Arize Phoenix for the OpenTelemetry tests, from the pinned venv of `make phoenix-venv`
# (made here when missing): `start` starts one on 127.0.0.1 and prints its HTTP base URL; `stop`
# stops it and removes its data; `url` prints the HTTP base (UI, REST API, GraphQL) of the one
# running, `otlp-http` its OTLP/HTTP base (protobuf only: the exporter appends /v1/traces), and
# `otlp-grpc` its OTLP/gRPC endpoint. CHRONICLE_PHOENIX_PORT, CHRONICLE_PHOENIX_GRPC_PORT and
# CHRONICLE_PHOENIX_DIR choose another server than the shared one. See tests/phoenix/README.md.
#
# Phoenix keeps its SQLite database in a temporary working directory; nothing is fetched at run
# time: telemetry pixels, web fonts and other outside resources, the agent assistant and the
# sandboxes are off, and it starts and serves its UI with no network. `start` is idempotent: a
# server already running on the port (started by this script) is reused.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${PHOENIX_VENV:-$ROOT/target/phoenix-venv}"
PORT="${CHRONICLE_PHOENIX_PORT:-46006}"
GRPC_PORT="${CHRONICLE_PHOENIX_GRPC_PORT:-44317}"
BASE="${CHRONICLE_PHOENIX_DIR:-${TMPDIR:-/tmp}/chronicle-phoenix-$(id -u)-$PORT}"
LOG="$BASE/server.log"
PIDFILE="$BASE/server.pid"
URL="http://127.0.0.1:$PORT"
START_TIMEOUT="${CHRONICLE_PHOENIX_START_TIMEOUT:-120}"

healthy() {
  curl -fsS --max-time 2 "$URL/healthz" >/dev/null 2>&1
}

alive() {
  [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null
}

running() {
  alive && healthy
}

start() {
  if running; then
    echo "$URL"
    return
  fi
  if [ ! -x "$VENV/bin/python" ] || [ ! -x "$VENV/bin/phoenix" ]; then
    make --no-print-directory -C "$ROOT" phoenix-venv >&2
  fi
  # A dead one's leftovers (or a crashed start) go: its database too.
  if alive; then kill -KILL -- "-$(cat "$PIDFILE")" 2>/dev/null || true; fi
  rm -rf "$BASE"
  mkdir -p "$BASE/work"
  # Only Phoenix's own variables set here count: any PHOENIX_*, OTEL_* or proxy setting of the
  # caller's environment (a database URL, auth, a collector to trace itself to) is dropped.
  local -a unset_vars=()
  local v
  for v in $(compgen -e); do
    case "$v" in
      PHOENIX_VENV) ;;
      PHOENIX_* | OTEL_* | http_proxy | https_proxy | HTTP_PROXY | HTTPS_PROXY | all_proxy | ALL_PROXY)
        unset_vars+=(-u "$v") ;;
    esac
  done
  # Phoenix binds its gRPC port on [::] (every interface) and has no setting for that address; the
  # launcher below puts it on loopback like the HTTP port (PHOENIX_HOST).
  env "${unset_vars[@]}" \
    PHOENIX_HOST=127.0.0.1 \
    PHOENIX_PORT="$PORT" \
    PHOENIX_GRPC_PORT="$GRPC_PORT" \
    PHOENIX_WORKING_DIR="$BASE/work" \
    PHOENIX_TELEMETRY_ENABLED=false \
    PHOENIX_ALLOW_EXTERNAL_RESOURCES=false \
    PHOENIX_DISABLE_AGENT_ASSISTANT=true \
    PHOENIX_ENABLE_MCP_SERVER=false \
    PHOENIX_ALLOWED_SANDBOX_PROVIDERS=NONE \
    PHOENIX_ENABLE_AUTH=false \
    PHOENIX_ENABLE_PROMETHEUS=false \
    PHOENIX_LOG_MIGRATIONS=false \
    NO_PROXY='*' no_proxy='*' \
    PYTHONDONTWRITEBYTECODE=1 \
    setsid "$VENV/bin/python" -c '
import sys
from grpc.aio import _server

_add = _server.Server.add_insecure_port
_server.Server.add_insecure_port = lambda self, address: _add(
    self, address.replace("[::]:", "127.0.0.1:", 1)
)
from phoenix.server.main import main

sys.argv = ["phoenix", "serve"]
sys.exit(main())
' </dev/null >"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  local deadline=$((SECONDS + START_TIMEOUT))
  until healthy; do
    if ! alive || [ "$SECONDS" -ge "$deadline" ]; then
      echo "phoenix: not ready on $URL within ${START_TIMEOUT}s (or it exited); its log:" >&2
      tail -40 "$LOG" >&2
      stop
      exit 1
    fi
    sleep 0.25
  done
  echo "$URL"
}

stop() {
  if alive; then
    local pid
    pid=$(cat "$PIDFILE")
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -rf "$BASE"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  url) running && echo "$URL" ;;
  otlp-http) running && echo "$URL" ;;
  otlp-grpc) running && echo "http://127.0.0.1:$GRPC_PORT" ;;
  *) echo "usage: $0 start|stop|url|otlp-http|otlp-grpc" >&2; exit 2 ;;
esac
