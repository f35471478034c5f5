#!/usr/bin/env bash
# The real `langgraph-sdk` (from PyPI, pinned in tests/langgraph/requirements.txt) against the
# real `chronicle serve`: what a LangGraph user's code does with the server's plain URL
# (tests/langgraph/test_sdk.py). Offline once the venv is made.
#
# The server runs on a free loopback port over a fresh data directory, with a bearer token (the
# SDK sends it as a header, as a user would) and one `--cors-origin` (to check what a browser UI
# may read), and no model (rules only).
#
# Usage: tests/langgraph/run.sh   (after `make test-deps`, which makes the venv)
# Env:   LANGGRAPH_VENV (default target/langgraph-venv).
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=${LANGGRAPH_VENV:-target/langgraph-venv}
py="$venv/bin/python"
if [[ ! -x $py ]] || ! "$py" -c 'import langgraph_sdk, pytest, httpx' 2>/dev/null; then
  echo "langgraph: $venv lacks langgraph-sdk or pytest; run \`make test-deps\` first" >&2
  exit 2
fi

source tests/serve.sh
# The reports stay for reading after a run: target/langgraph/{pytest,server}.log.
logs=target/langgraph
mkdir -p "$logs"
token=chronicle-langgraph-token-0123
origin=http://ui.example
start_server langgraph "$logs/server.log" "$token" --data "$work/data" --cors-origin "$origin"

started=$SECONDS
status=0
# The SDK reads LangSmith/LangGraph keys from the environment: none may leak into the requests.
env -u LANGGRAPH_API_KEY -u LANGSMITH_API_KEY -u LANGCHAIN_API_KEY \
  CHRONICLE_URL="$base" CHRONICLE_TOKEN="$token" CHRONICLE_CORS_ORIGIN="$origin" \
  "$py" -m pytest -q -p no:cacheprovider tests/langgraph >"$logs/pytest.log" 2>&1 || status=$?
stop_server
result=$(grep -E '^[0-9]+ (passed|failed)|^=+ .* in [0-9.]+s' "$logs/pytest.log" | tail -n 1 | tr -d '=' | xargs || true)
sdk=$("$py" -c 'from importlib.metadata import version; print(version("langgraph-sdk"))')
if [[ $status -ne 0 ]]; then
  cat "$logs/pytest.log"
  echo "--- the server's log: $logs/server.log ---"
  tail -n 50 "$logs/server.log"
  echo "langgraph-sdk $sdk: FAILED: ${result:-exit $status}" >&2
  exit 1
fi
echo "langgraph-sdk $sdk against chronicle serve: $result ($((SECONDS - started)) s)"
