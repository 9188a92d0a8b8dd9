#!/usr/bin/env bash
# Builds Countersign, serves tests/interop/interop-agent.toml on 127.0.0.1:0 and runs every
# interop client against it (setup.sh first installs the SDKs):
#   tests/interop/run.sh            # all clients
#   tests/interop/run.sh -v         # ... with request/response logs
#   BASE_URL=http://127.0.0.1:7717 tests/interop/run.sh   # against a server you started
# Exit status: number of failed client runs (0 = all passed).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
"$here/setup.sh"

if [ -z "${BASE_URL:-}" ]; then
    cargo build --quiet --no-default-features --manifest-path "$root/Cargo.toml" || exit 2
    data="$(mktemp -d)"
    "$root/target/debug/countersign" serve --config "$here/interop-agent.toml" --data-dir "$data" \
        --bind 127.0.0.1:0 >"$data/stdout" 2>"$data/server.log" &
    pid=$!
    trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null' EXIT
    for _ in $(seq 100); do grep -q '^listening on ' "$data/stdout" 2>/dev/null && break; sleep 0.1; done
    BASE_URL="$(sed -n 's/^listening on //p' "$data/stdout" | head -n1)"
    [ -n "$BASE_URL" ] || { echo "server did not start; log: $data/server.log" >&2; exit 2; }
    echo "# countersign at $BASE_URL (log: $data/server.log)"
fi

cd "$here"
failed=0
run() { echo; echo "## $*"; "$@" || failed=$((failed + 1)); }
run .venv-sdk1/bin/python py_client.py "$BASE_URL" interop "$@"
run .venv-sdk1/bin/python py_client.py "$BASE_URL" interop --card root --transport jsonrpc "$@"
run .venv-sdk1/bin/python py_client.py "$BASE_URL" interop --dialect 0.3 "$@"
run .venv-sdk03/bin/python py_client.py "$BASE_URL" interop "$@"
run node js_client.mjs "$BASE_URL" interop "$@"
run node js_client.mjs "$BASE_URL" interop --card root --transport jsonrpc "$@"
run node js_client.mjs "$BASE_URL" interop --dialect 0.3 "$@"
run .venv-sdk03/bin/python legacy_client.py "$BASE_URL" interop --stream "$@"
echo
echo "# interop: $failed client run(s) failed"
exit "$failed"
