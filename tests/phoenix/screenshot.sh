#!/usr/bin/env bash
# A screenshot of a page of Phoenix's UI with headless Chromium (Debian's `chromium`, installed
# when missing): `screenshot.sh URL OUT.png [WIDTH,HEIGHT]`. A trace with its span tree is at
# $(server.sh url)/projects/<project id>/traces/<trace id> (the project's id is the `id` of
# GET /v1/projects, e.g. UHJvamVjdDoy; the trace id is hex): see tests/phoenix/README.md. The UI
# loads offline (server.sh turns its web fonts and telemetry off); Chromium's own background
# traffic is off too.
set -euo pipefail

url="${1:?usage: $0 URL OUT.png [WIDTH,HEIGHT]}"
out="${2:?usage: $0 URL OUT.png [WIDTH,HEIGHT]}"
size="${3:-1600,1000}"

if ! command -v chromium >/dev/null 2>&1; then
  echo "phoenix: installing Debian's chromium" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
mkdir -p "$(dirname "$out")"
rm -f "$out"
# The virtual time budget lets the single-page app fetch its data (GraphQL) and render, and
# --run-all-compositor-stages-before-draw lets the trace's slide-over panel finish its animation
# (without it the panel may come out half transparent). No host but loopback resolves, so that
# neither the page nor Chromium's own background services reach out.
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost" \
  --hide-scrollbars --user-data-dir="$profile" --window-size="$size" \
  --virtual-time-budget=10000 --run-all-compositor-stages-before-draw \
  --screenshot="$(realpath -m "$out")" "$url" \
  >"$profile/chromium.log" 2>&1 || { cat "$profile/chromium.log" >&2; exit 1; }
[ -s "$out" ] || { cat "$profile/chromium.log" >&2; echo "phoenix: no screenshot written" >&2; exit 1; }
echo "$out"
