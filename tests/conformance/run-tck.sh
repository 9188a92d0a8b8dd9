#!/usr/bin/env bash
# Runs the official A2A TCK (a2aproject/a2a-tck) against `countersign serve`:
#
#   tests/conformance/run-tck.sh /path/to/a2a-tck [--level must|all]
#       branch 1.0-dev (A2A 1.0), with tests/conformance/tck-agent.toml
#   tests/conformance/run-tck.sh /path/to/a2a-tck-0.3 --v03
#       branch 0.3.x (A2A 0.3), categories mandatory and capabilities over
#       jsonrpc and rest, with tests/conformance/tck03-agent.toml
#
# The TCK checkout needs its own venv: `python3 -m venv venv && venv/bin/pip install -e .`.
# Exits with the TCK's exit code (0 = every selected test passed or skipped).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tck="${1:?usage: run-tck.sh TCK_DIR [--level must|all]}"
level="must"
v03=""
if [ "${2:-}" = "--level" ]; then level="${3:-must}"; fi
if [ "${2:-}" = "--v03" ]; then v03=1; fi
config="$here/tck-agent.toml"
[ -z "$v03" ] || config="$here/tck03-agent.toml"
[ -x "$tck/venv/bin/python" ] || { echo "no venv in $tck: python3 -m venv venv && venv/bin/pip install -e ." >&2; exit 2; }

. "$root/scripts/headless-bin.sh"
data="$(mktemp -d)"
out="$data/stdout"
"$COUNTERSIGN_BIN" serve --config "$config" --data-dir "$data" --bind 127.0.0.1:0 \
    >"$out" 2>"$data/server.log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    grep -q '^listening on ' "$out" 2>/dev/null && break
    sleep 0.1
done
url="$(sed -n 's/^listening on //p' "$out" | head -n1)"
[ -n "$url" ] || { echo "server did not start; log: $data/server.log" >&2; exit 2; }
echo "countersign at $url (log: $data/server.log)"

cd "$tck"
if [ -n "$v03" ]; then
    status=0
    for category in mandatory capabilities; do
        venv/bin/python run_tck.py --sut-url "$url/a2a/tck" --category "$category" --transports jsonrpc,rest || status=$?
    done
    exit "$status"
fi
args=(--sut-host "$url" --transport jsonrpc,http_json)
[ "$level" = "all" ] || args+=(--level "$level")
venv/bin/python run_tck.py "${args[@]}" -- --webhook-host=127.0.0.1
