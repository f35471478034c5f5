#!/usr/bin/env bash
# agent-chat-ui's own hook — `useStream` of the real `@langchain/langgraph-sdk` for JavaScript,
# with React, at the versions agent-chat-ui locks (package-lock.json) — against the real
# `chronicle serve`: the approval card's four actions, editing an earlier message and regenerating
# an answer, with the exact requests the UI sends (tests/langgraph-js/chat-ui.test.js, run by
# node's own test runner). Offline once `npm ci` has filled node_modules.
#
# The server runs on a free loopback port over a fresh data directory, with a bearer token (the
# UI sends it as its API key) and approvals on every TODO (`--hitl-default every_todo`: the UI
# cannot set run options, so this is how a person runs Chronicle for it), and no model.
#
# Usage: tests/langgraph-js/run.sh   (after `make test-deps`, which runs `npm ci` here)
set -euo pipefail
cd "$(dirname "$0")/../.."

dir=tests/langgraph-js
if [[ ! -d $dir/node_modules/@langchain/langgraph-sdk ]] || ! command -v node >/dev/null 2>&1; then
  echo "langgraph-js: node or $dir/node_modules is missing; run \`make test-deps\` first" >&2
  exit 2
fi

py=python3 # the health check of tests/serve.sh
source tests/serve.sh
# The reports stay for reading after a run: target/langgraph-js/{node-test,server}.log.
logs=target/langgraph-js
mkdir -p "$logs"
token=chronicle-langgraph-js-token-0123
start_server langgraph-js "$logs/server.log" "$token" --data "$work/data" --hitl-default every_todo

started=$SECONDS
status=0
# The SDK reads LangSmith/LangGraph keys from the environment: none may leak into the requests.
env -u LANGGRAPH_API_KEY -u LANGSMITH_API_KEY -u LANGCHAIN_API_KEY \
  CHRONICLE_URL="$base" CHRONICLE_TOKEN="$token" \
  node --test --test-reporter=spec "$dir/chat-ui.test.js" >"$logs/node-test.log" 2>&1 || status=$?
stop_server
result=$(grep -E '^ℹ (pass|fail) ' "$logs/node-test.log" | tr -d 'ℹ' | xargs || true)
sdk=$(node -p "require('./$dir/node_modules/@langchain/langgraph-sdk/package.json').version")
if [[ $status -ne 0 ]]; then
  cat "$logs/node-test.log"
  echo "--- the server's log: $logs/server.log ---"
  tail -n 50 "$logs/server.log"
  echo "@langchain/langgraph-sdk $sdk (useStream): FAILED: ${result:-exit $status}" >&2
  exit 1
fi
echo "@langchain/langgraph-sdk $sdk (useStream) against chronicle serve: $result ($((SECONDS - started)) s)"
