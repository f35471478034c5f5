# Sourced by the test runners beside it (tests/schemathesis/run.sh, tests/langgraph/run.sh): the
# debug `chronicle` binary, a scratch directory removed on exit, and a real `chronicle serve` on a
# free loopback port, with no model (the rules answer, so runs need nothing from outside).
#
# The runner sets $py (a Python for the health check) before sourcing; afterwards it has $bin,
# $work, `start_server` (sets $server_pid and $base) and `stop_server`.

# CHRONICLE_BIN: a `chronicle` binary to use instead of building one.
if [[ -n ${CHRONICLE_BIN:-} ]]; then
  bin=$CHRONICLE_BIN
else
  cargo build --quiet -p chronicle-tools
  bin=target/debug/chronicle
fi
work=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# start_server LABEL LOG TOKEN [serve args...]: the server (with TOKEN as its one bearer token,
# none when empty) logging to LOG, up and answering /healthz; LABEL names the runner in errors.
start_server() {
  local label=$1 log=$2 token=$3
  shift 3
  env -u OPENAI_API_KEY -u CHRONICLE_LLM_API_KEY -u CHRONICLE_LLM_BASE_URL \
    -u CHRONICLE_API_TOKEN ${token:+CHRONICLE_API_TOKEN=$token} NO_COLOR=1 RUST_LOG=warn,chronicle=info \
    "$bin" serve --addr 127.0.0.1:0 "$@" 2>"$log" &
  server_pid=$!
  local addr=
  for _ in $(seq 600); do
    addr=$(grep -o 'chronicle is listening addr=127\.0\.0\.1:[0-9]*' "$log" | cut -d= -f2 || true)
    [[ -n $addr ]] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z $addr ]]; then
    echo "$label: the server did not start:" >&2
    cat "$log" >&2
    exit 1
  fi
  base="http://$addr"
  "$py" - "$base/healthz" "$label" <<'PY'
import sys, time, urllib.request
for _ in range(300):
    try:
        if urllib.request.urlopen(sys.argv[1], timeout=2).status == 200:
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.1)
sys.exit(f"{sys.argv[2]}: /healthz never answered 200")
PY
}

stop_server() {
  kill "$server_pid"
  wait "$server_pid" || true
  server_pid=
}
