#!/usr/bin/env bash
# Schemathesis against the real `chronicle serve`: the OpenAPI document the server serves is the
# contract, and every check schemathesis has is run on what the server answers (no 500s, only
# documented statuses, content types and headers, bodies that match their schemas, schema-valid
# requests accepted and invalid ones refused, 405 with `Allow`, auth enforced where declared).
#
# Twice: without tokens (everyone is `local`), and with CHRONICLE_API_TOKEN (every request then
# carries the bearer token). Each against a fresh data directory, no model (rules only), a fixed
# seed and a bounded number of examples per operation: about 40 s each on two cores.
#
# Before it, tests/schemathesis/walk.py takes a real run through every route (schemathesis's own
# ids mostly name runs that do not exist) and checks each answer against the document.
#
# tests/schemathesis/hooks.py tells the generator the one rule between two fields that JSON
# Schema cannot state (a plan's dependencies name agents of the same plan).
#
# Not exercised here, because they are not request/response exchanges: `/ws` (a WebSocket:
# the upgrade never completes as an HTTP answer; tests/api_ws.rs drives it) and
# `/api/v1/events` (a server-sent event stream that by design never ends; tests/api_sse.rs
# drives it). A run's own stream `/api/v1/agent/{run_id}/events` is exercised: for a run that
# does not exist it answers at once.
#
# Usage: tests/schemathesis/run.sh   (after `make test-deps`, which makes the venv)
# Env:   SCHEMATHESIS_VENV (default target/schemathesis-venv), SCHEMATHESIS_MAX_EXAMPLES
#        (default 100 per operation), SCHEMATHESIS_SEED (default 20261123).
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=${SCHEMATHESIS_VENV:-target/schemathesis-venv}
max_examples=${SCHEMATHESIS_MAX_EXAMPLES:-100}
seed=${SCHEMATHESIS_SEED:-20261123}
st="$venv/bin/schemathesis"
if [[ ! -x $st ]]; then
  echo "schemathesis: $st is missing; run \`make test-deps\` first" >&2
  exit 2
fi

py="$venv/bin/python"
source tests/serve.sh
# The reports stay for reading after a run: target/schemathesis/{open,bearer}.log and the
# servers' logs beside them.
logs=target/schemathesis
mkdir -p "$logs"

# Runs schemathesis against a fresh server with `name`'s settings; sets $summary.
fuzz() {
  local name=$1 token=$2
  mkdir -p "$work/$name"
  start_server schemathesis "$logs/$name-server.log" "$token" --data "$work/$name/data"
  local auth=()
  [[ -n $token ]] && auth=(--header "Authorization: Bearer $token")
  if ! "$venv/bin/python" tests/schemathesis/walk.py "$base" "$token" >"$logs/$name-walk.log" 2>&1; then
    cat "$logs/$name-walk.log"
    echo "schemathesis ($name): FAILED: the walk through a real run" >&2
    return 1
  fi
  walked=$(tail -n 1 "$logs/$name-walk.log")
  local status=0
  SCHEMATHESIS_HOOKS=tests/schemathesis/hooks.py "$st" run "$base/openapi.json" \
    --checks all \
    --seed "$seed" \
    --max-examples "$max_examples" \
    --generation-database none \
    --request-timeout 20 \
    --exclude-path /ws \
    --exclude-path /api/v1/events \
    --no-color \
    "${auth[@]}" >"$logs/$name.log" 2>&1 || status=$?
  stop_server
  local cases verdict
  cases=$(grep -A1 '^Test cases:' "$logs/$name.log" | tail -n 1 | xargs || true)
  verdict=$(grep -E '^=+ .* =+$' "$logs/$name.log" | tail -n 1 | tr -d '=' | xargs || true)
  summary="$walked, $cases ($verdict)"
  if [[ $status -ne 0 ]]; then
    cat "$logs/$name.log"
    echo "--- the server's log: $logs/$name-server.log ---"
    tail -n 50 "$logs/$name-server.log"
    echo "schemathesis ($name): FAILED: ${summary:-exit $status}" >&2
    return 1
  fi
}

started=$SECONDS
fuzz open ""
open=$summary
fuzz bearer "chronicle-schemathesis-token-0123"
echo "schemathesis $("$st" --version | grep -o '[0-9][0-9.]*'): without tokens: $open; with a bearer token: $summary ($((SECONDS - started)) s)"
