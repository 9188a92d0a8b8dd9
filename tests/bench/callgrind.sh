#!/usr/bin/env bash
# Instructions per request, counted by callgrind: Countersign (release, no
# desktop) under REQUESTS requests at CONNS connections, after WARM of the
# same kind, for one scenario:
#   send  durable SendMessage to a `human` agent (each task parked and
#         committed to SQLite before the answer)
#   send03 the same send from a 0.3 client (`message/send`, no A2A-Version)
#   rest03 the same send from a 0.3 HTTP+JSON client (`POST .../v1/message:send`)
#   get   GetTask of one parked task
#   get03 the same task read by a 0.3 client (`tasks/get`, no A2A-Version)
#   card  GET of the agent card
#   queue GET of the queue's first page (50 of FILL parked tasks, stored
#         by the same build run without valgrind first)
#   push  webhook push of a new input-required task of a watched peer,
#         re-read from a stub peer (the load generator's) and parked
#         before the answer
#
#   bash tests/bench/callgrind.sh [send|send03|rest03|get|get03|card|queue|push] [BINARY]
#
# SYSTEM=rust or SYSTEM=floor counts the same for the Rust SDK's echo server
# (in-memory) or the minimal durable server of the benchmark instead, in the
# scenarios they share (send, get, card): the SDK targets as ratios that
# the VM's speed does not move. (Only user-space instructions are counted:
# the system calls, which both make alike, and the waits are not.)
#
# Rates on a shared VM move by 20% between runs; instruction counts move by
# about 2% (how requests fall into commits and checkpoints), so they show
# changes of a few percent that req/s cannot. To compare two builds, run
# them alternately, twice each. The profile is left in $OUT (callgrind's
# format: `callgrind_annotate --inclusive=yes $OUT | head -80`).
#
# Environment: SYSTEM (countersign), REQUESTS (3000), CONNS (32), WARM (500),
# FILL (20000), OUT (/tmp/countersign-callgrind.out). Installs valgrind with apt if missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
SCENARIO="${1:-send}"
BIN="${2:-}"
SYSTEM="${SYSTEM:-countersign}"
REQUESTS="${REQUESTS:-3000}"
CONNS="${CONNS:-32}"
WARM="${WARM:-500}"
FILL="${FILL:-20000}"
OUT="${OUT:-/tmp/countersign-callgrind.out}"
case "$SCENARIO" in send | send03 | rest03 | get | get03 | card | queue | push) ;; *)
    echo "usage: $0 [send|send03|rest03|get|get03|card|queue|push] [BINARY]" >&2
    exit 2
    ;;
esac
case "$SYSTEM/$SCENARIO" in
countersign/* | rust/send | rust/get | rust/card | floor/send | floor/get | floor/card) ;;
*)
    echo "SYSTEM=$SYSTEM: countersign, or rust or floor with send, get or card" >&2
    exit 2
    ;;
esac
if ! command -v valgrind >/dev/null; then
    apt-get update -qq && apt-get install -y -qq valgrind >/dev/null
fi
if [ "$SYSTEM" != countersign ]; then
    crate="$([ "$SYSTEM" = rust ] && echo rust-sdk-echo || echo durable-floor)"
    CARGO_TARGET_DIR="$here/target" cargo build --quiet --release --manifest-path "$here/$crate/Cargo.toml"
    BIN="$here/target/release/$crate"
elif [ -z "$BIN" ]; then
    (cd "$root" && cargo build --quiet --release --no-default-features)
    BIN="$root/target/release/countersign"
fi
CARGO_TARGET_DIR="$here/target" cargo build --quiet --release --manifest-path "$here/loadgen/Cargo.toml"
LOADGEN="$here/target/release/loadgen"

work="$(mktemp -d "${TMPDIR:-/tmp}/countersign-callgrind.XXXXXX")"
pid=""
peer=""
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
    if [ -n "$peer" ]; then kill "$peer" 2>/dev/null || true; fi
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
cat >"$work/config.toml" <<'TOML'
[webhooks]
sweep_secs = 0
[[agents]]
id = "inbox"
backend = "human"
TOML
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
if [ "$SCENARIO" = push ]; then
    peer_port="$(free_port)"
    "$LOADGEN" stub-peer "$peer_port" &
    peer=$!
    printf '[[peers]]\nid = "stub"\nurl = "http://127.0.0.1:%s/"\n' "$peer_port" >>"$work/config.toml"
fi
port="$(free_port)"
base="http://127.0.0.1:$port/a2a/inbox"
if [ "$SYSTEM" != countersign ]; then base="http://127.0.0.1:$port"; fi
card="$base/.well-known/agent-card.json"
send='{"jsonrpc":"2.0","id":{n},"method":"SendMessage","params":{"message":{"messageId":"PREFIX-{n}","role":"ROLE_USER","parts":[{"text":"hello {n}"}]}}}'
send03='{"jsonrpc":"2.0","id":{n},"method":"message/send","params":{"message":{"kind":"message","messageId":"PREFIX-{n}","role":"user","parts":[{"kind":"text","text":"hello {n}"}]}}}'
rest03='{"message":{"messageId":"PREFIX-{n}","role":"ROLE_USER","content":[{"text":"hello {n}"}]}}'
wait_card() {
    for _ in $(seq 600); do curl -sf "$card" >/dev/null && break; sleep 0.2; done
    curl -sf "$card" >/dev/null || { cat "$work/serve.log" >&2; exit 1; }
}
if [ "$SCENARIO" = queue ]; then
    # The parked tasks are stored at full speed; the profiled server then
    # opens the same data dir.
    "$BIN" serve --data-dir "$work" --bind "127.0.0.1:$port" --config "$work/config.toml" \
        >"$work/serve.log" 2>&1 &
    pid=$!
    wait_card
    "$LOADGEN" "$base" --conns "$CONNS" --limit "$FILL" --warmup 0 --duration 3600 --method POST \
        --body "${send//PREFIX/fill}" --rpc-errors --header "A2A-Version: 1.0" >/dev/null
    kill "$pid" && wait "$pid" || true
    pid=""
fi
case "$SYSTEM" in
countersign) server=("$BIN" serve --data-dir "$work" --bind "127.0.0.1:$port" --config "$work/config.toml") ;;
rust) server=("$BIN" "$port") ;;
floor) server=("$BIN" "$port" "$work/floor.db") ;;
esac
valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" --dump-instr=no "${server[@]}" \
    >"$work/serve.log" 2>&1 &
pid=$!
wait_card

load() { # load COUNT PREFIX
    case "$SCENARIO" in
    send) "$LOADGEN" "$base" --conns "$CONNS" --limit "$1" --warmup 0 --duration 3600 --method POST \
        --body "${send//PREFIX/$2}" --rpc-errors --header "A2A-Version: 1.0" ;;
    send03) "$LOADGEN" "$base" --conns "$CONNS" --limit "$1" --warmup 0 --duration 3600 --method POST \
        --body "${send03//PREFIX/$2}" --rpc-errors ;;
    rest03) "$LOADGEN" "$base/v1/message:send" --conns "$CONNS" --limit "$1" --warmup 0 --duration 3600 \
        --method POST --body "${rest03//PREFIX/$2}" ;;
    get) "$LOADGEN" "$base" --conns "$CONNS" --limit "$1" --warmup 0 --duration 3600 --method POST \
        --body "{\"jsonrpc\":\"2.0\",\"id\":{n},\"method\":\"GetTask\",\"params\":{\"id\":\"$task\"}}" \
        --rpc-errors --header "A2A-Version: 1.0" ;;
    get03) "$LOADGEN" "$base" --conns "$CONNS" --limit "$1" --warmup 0 --duration 3600 --method POST \
        --body "{\"jsonrpc\":\"2.0\",\"id\":{n},\"method\":\"tasks/get\",\"params\":{\"id\":\"$task\"}}" \
        --rpc-errors ;;
    card) "$LOADGEN" "$card" --conns "$CONNS" --limit "$1" --warmup 0 --duration 3600 ;;
    push) "$LOADGEN" "$hook" --conns "$CONNS" --limit "$1" --warmup 0 --duration 3600 --method POST \
        --header "A2A-Notification-Token: $hook_token" \
        --body "{\"statusUpdate\":{\"taskId\":\"$2-{n}\",\"contextId\":\"c-{n}\",\"status\":{\"state\":\"TASK_STATE_INPUT_REQUIRED\"}}}" ;;
    queue) "$LOADGEN" "http://127.0.0.1:$port/api/queue?limit=50&sort=oldest" --conns "$CONNS" \
        --limit "$1" --warmup 0 --duration 3600 --header "Authorization: Bearer $(cat "$work/ui-token")" ;;
    esac
}
task="$(curl -sf "$base" -H 'A2A-Version: 1.0' -H 'content-type: application/json' \
    -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"first","role":"ROLE_USER","parts":[{"text":"hello"}]}}}' |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["result"]; print((r.get("task") or r)["id"])')"
if [ "$SCENARIO" = push ]; then
    sub="$(curl -sf -X POST -H "Authorization: Bearer $(cat "$work/ui-token")" \
        "http://127.0.0.1:$port/api/peers/stub/subscriptions")"
    hook="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["url"])' "$sub")"
    hook_token="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["token"])' "$sub")"
fi
load "$WARM" warm >/dev/null
# callgrind takes a command only while the program runs: a few requests
# after each one make sure it is taken before (zero) or after (dump) the
# measured load. Those few cards are counted too (about 0.1%).
nudge() { for _ in 1 2 3 4 5; do curl -sf "$card" >/dev/null; sleep 0.2; done; }
callgrind_control -z "$pid" >/dev/null 2>&1
nudge
load "$REQUESTS" run >"$work/load.txt"
callgrind_control -d "$pid" >/dev/null 2>&1
nudge
total="$(callgrind_annotate "$work/cg.out.1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')"
cp "$work/cg.out.1" "$OUT"
errors="$(tail -1 "$work/load.txt" | python3 -c 'import json,sys; print(json.load(sys.stdin)["errors"])')"
echo "$([ "$SYSTEM" = countersign ] || echo "$SYSTEM ")$SCENARIO: $((total / REQUESTS)) instructions per request ($REQUESTS requests, $errors errors, $total instructions)"
[ "$errors" = 0 ]
