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
    . "$root/scripts/headless-bin.sh" || exit 2
    data="$(mktemp -d)"
    DATA_DIR="$data"
    # The same agents again in a tenant, `lab` (/a2a/lab/interop): the SDKs
    # must reach them through their cards' AgentInterface.tenant.
    config="$data/config.toml"
    {
        cat "$here/interop-agent.toml"
        printf '\n[[tenants]]\nid = "lab"\n\n'
        sed -n '/^\[\[agents\]\]/,$p' "$here/interop-agent.toml" |
            sed -e 's/^\[\[agents\]\]/[[tenants.agents]]/' -e 's/^\[\[agents\./[[tenants.agents./' \
                -e 's/^\[agents\./[tenants.agents./'
    } >"$config"
    "$COUNTERSIGN_BIN" serve --config "$config" --data-dir "$data" \
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
run ../rust_sdk/target/debug/rust-sdk-client "$BASE_URL" interop
run .venv-sdk03/bin/python legacy_client.py "$BASE_URL" interop --stream "$@"
# The SDK's signature verifier accepts every card we serve (keys from our JWKS).
run .venv-sdk1/bin/python card_signature.py "$BASE_URL" interop
if [ -n "${DATA_DIR:-}" ]; then
    # A tenant's agent, found and called the way its card says.
    run .venv-sdk1/bin/python py_client.py "$BASE_URL" lab/interop "$@"
    run .venv-sdk1/bin/python py_client.py "$BASE_URL" lab/interop --dialect 0.3 "$@"
    run .venv-sdk03/bin/python py_client.py "$BASE_URL" lab/interop "$@"
    run node js_client.mjs "$BASE_URL" lab/interop "$@"
    run ../rust_sdk/target/debug/rust-sdk-client "$BASE_URL" lab/interop
fi

# A person decides, through the CLI, on work the official Python SDK handed
# to the human agent; the SDK client sees the outcome by streaming, polling,
# or reconnecting and polling.
human() { # wait-mode cli-command expected-state expected-text [cli args...]
    local mode="$1" cmd="$2" want="$3" text="$4"; shift 4
    local out; out="$(mktemp)"
    echo; echo "## human_flow.py --wait $mode, then countersign $cmd"
    .venv-sdk1/bin/python human_flow.py "$BASE_URL" --wait "$mode" --expect "$want" --expect-text "$text" >"$out" &
    local client=$!
    local id=""
    for _ in $(seq 300); do
        id="$(sed -n 's/^TASK //p' "$out" | head -n1)"
        [ -n "$id" ] && break
        kill -0 "$client" 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$id" ]; then
        echo "FAIL the client never parked a task"; failed=$((failed + 1)); wait "$client"; cat "$out"; return
    fi
    if ! "$CLI" "$cmd" "$id" "$@" --data-dir "$DATA_DIR"; then
        echo "FAIL countersign $cmd $id"; failed=$((failed + 1))
    fi
    wait "$client" || failed=$((failed + 1))
    cat "$out"
}
if [ -n "${DATA_DIR:-}" ]; then
    CLI="$COUNTERSIGN_BIN"
    human stream approve TASK_STATE_COMPLETED "Approved. go ahead" --comment "go ahead"
    human poll reply TASK_STATE_COMPLETED "Plan B" "Plan B"
    human blocking reject TASK_STATE_REJECTED "Rejected. not today" --reason "not today"
else
    echo "# (the decision flows need the server's data dir: skipped with BASE_URL)"
fi

# Push notifications: the SDK sets push configs (inline in the send, and with
# its create/set call), push_flow.py's webhook receives every task event.
run .venv-sdk1/bin/python push_flow.py "$BASE_URL" interop
run .venv-sdk1/bin/python push_flow.py "$BASE_URL" interop --transport http_json
run .venv-sdk1/bin/python push_flow.py "$BASE_URL" interop --dialect 0.3
run .venv-sdk03/bin/python push_flow.py "$BASE_URL" interop
run .venv-sdk1/bin/python push_flow.py "$BASE_URL" interop --dialect 0.3 --transport http_json
run .venv-sdk03/bin/python push_flow.py "$BASE_URL" interop --transport http_json
if [ -n "${DATA_DIR:-}" ]; then
    run .venv-sdk1/bin/python push_flow.py "$BASE_URL" lab/interop
    run .venv-sdk1/bin/python push_flow.py "$BASE_URL" lab/interop --transport http_json
fi

echo
echo "# interop: $failed client run(s) failed"
exit "$failed"
