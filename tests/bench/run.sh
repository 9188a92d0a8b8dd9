#!/usr/bin/env bash
# Load comparison: Countersign against the official A2A SDKs (Rust, JS, Python),
# each serving an equivalent echo agent on 127.0.0.1. Prints one Markdown table.
#
#   bash tests/bench/run.sh
#
# Builds Countersign (release, no desktop), the load generator and the Rust SDK
# echo server (tests/bench/*/, own workspaces), installs the JS SDK (npm ci) and
# the Python SDK (a venv), then runs every scenario with the server pinned to
# one core and the load to another (taskset), $WARMUP s of warm-up and
# $DURATION s measured at $CONNS keep-alive connections.
#
# Environment: DURATION (10), WARMUP (3), CONNS (32), QUEUE_TASKS (100000),
# SERVER_CPU (0), LOAD_CPU (1), SYSTEMS ("countersign floor rust js py-mem py-sqlite"),
# PUSHES (200, for push → parked latency), ROUNDS (5) and ROUND_SECONDS (5)
# for the alternating rounds below. Needs cargo, node ≥ 20, npm, curl,
# python3 (with venv), taskset; takes 10–15 minutes.
#
# The SDK targets are ratios, and this VM's speed drifts by a factor of two
# over minutes, so one 10-second run per system can put one system on a
# quick minute and the next on a slow one. After the runs above, every
# system's SendMessage is run again in ROUNDS rounds, each system once per
# round (in an order that turns by one each round), all servers started
# together on the server's core and idle but for the one loaded; a ratio is
# taken within each round, and its median and range are reported. Right
# after its SendMessage, each system with a card target (Countersign, and
# the Rust SDK and the floor it is compared with) serves its agent card
# for the same time, so the card ratio is taken within rounds too.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-3}"
CONNS="${CONNS:-32}"
QUEUE_TASKS="${QUEUE_TASKS:-100000}"
SERVER_CPU="${SERVER_CPU:-0}"
LOAD_CPU="${LOAD_CPU:-1}"
SYSTEMS="${SYSTEMS:-countersign floor rust js py-mem py-sqlite}"
PUSHES="${PUSHES:-200}"
ROUNDS="${ROUNDS:-5}"
ROUND_SECONDS="${ROUND_SECONDS:-5}"
export CARGO_INCREMENTAL=0

log() { echo "bench: $*" >&2; }

# ---- build and install ------------------------------------------------------
CS="$root/target/release/countersign"
if [[ " $SYSTEMS " == *" countersign "* ]]; then
    log "building Countersign (release, --no-default-features)"
    (cd "$root" && cargo build --quiet --release --no-default-features)
fi
export CARGO_TARGET_DIR="$here/target"
log "building the load generator, the durable floor and the Rust SDK echo server"
cargo build --quiet --release --manifest-path "$here/loadgen/Cargo.toml"
cargo build --quiet --release --manifest-path "$here/durable-floor/Cargo.toml"
cargo build --quiet --release --manifest-path "$here/rust-sdk-echo/Cargo.toml"
LOADGEN="$CARGO_TARGET_DIR/release/loadgen"
FLOOR="$CARGO_TARGET_DIR/release/durable-floor"
RUST_ECHO="$CARGO_TARGET_DIR/release/rust-sdk-echo"
if [[ " $SYSTEMS " == *" js "* ]]; then
    log "installing @a2a-js/sdk (npm ci)"
    (cd "$here/js" && npm ci --silent --no-audit --no-fund)
fi
if [[ " $SYSTEMS " == *" py-"* ]]; then
    venv="$here/python/.venv"
    want="$(sha256sum "$here/python/requirements.txt" | cut -d' ' -f1)"
    if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$want" ]; then
        log "installing a2a-sdk into $venv"
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$here/python/requirements.txt"
        echo "$want" >"$venv/.stamp"
    fi
fi

# ---- helpers ----------------------------------------------------------------
work="$(mktemp -d "${TMPDIR:-/tmp}/countersign-bench.XXXXXX")"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
results="$work/results.tsv"
extras="$work/extras.tsv"
: >"$results"
: >"$extras"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
json_field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
kib() { awk -v k="$1" '/^'"$1"':/ {print $2}' "/proc/$2/status"; }
mib() { awk -v v="$1" 'BEGIN {printf "%.1f", v/1024}'; }

# start NAME CARD_URL CMD...: starts CMD on $SERVER_CPU, waits for the card,
# records startup time and idle RSS; sets $server_pid.
start() {
    local name="$1" url="$2"
    shift 2
    local out
    out="$("$LOADGEN" startup "$url" -- sh -c 'exec taskset -c "$0" "$@" >>"'"$work/$name.log"'" 2>&1' "$SERVER_CPU" "$@")"
    server_pid="$(json_field "$out" pid)"
    pids+=("$server_pid")
    sleep 1
    if [ -z "${quiet_start:-}" ]; then
        printf '%s\tstartup to first card\t%s ms\n' "$name" "$(json_field "$out" startup_ms)" >>"$extras"
        printf '%s\tidle RSS after start\t%s MiB\n' "$name" "$(mib "$(kib VmRSS "$server_pid")")" >>"$extras"
    fi
    log "$name up (pid $server_pid, $(json_field "$out" startup_ms) ms)"
}

stop() {
    kill "$server_pid" 2>/dev/null || true
    for _ in $(seq 100); do
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
}

# load SYSTEM SCENARIO URL [loadgen options]: one measured run; resets the
# server's peak RSS first (clear_refs 5) so the peak is this scenario's.
load() {
    local system="$1" scenario="$2" url="$3"
    shift 3
    echo 5 >"/proc/$server_pid/clear_refs" 2>/dev/null || true
    local out
    out="$(taskset -c "$LOAD_CPU" "$LOADGEN" "$url" --conns "$CONNS" --duration "$DURATION" --warmup "$WARMUP" "$@" 2>"$work/loadgen.err")" || {
        log "$system $scenario: load generator failed: $(cat "$work/loadgen.err")"
        return 1
    }
    if [ -s "$work/loadgen.err" ]; then log "$system $scenario: $(cat "$work/loadgen.err")"; fi
    last_out="$out"
    local peak after
    peak="$(mib "$(kib VmHWM "$server_pid")")"
    after="$(mib "$(kib VmRSS "$server_pid")")"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s / %s\n' "$system" "$scenario" \
        "$(json_field "$out" rps)" "$(json_field "$out" p50_ms)" "$(json_field "$out" p99_ms)" \
        "$(json_field "$out" errors)" "$peak" "$after" >>"$results"
    log "$system $scenario: $out"
}

# stalls WHEN: how much the host holds up a thread that only computes on the
# server's core (no server running), so a reader can tell a slow machine's
# p99 from the server's own.
stalls() {
    local out
    out="$(taskset -c "$SERVER_CPU" "$LOADGEN" stalls 5)"
    log "stalls $1: $out"
    printf 'machine\tslices of fixed arithmetic on CPU %s, 5 s, %s\tp50 %s ms, p99 %s ms, p99.9 %s ms, max %s ms; %s of %s over twice the median\n' \
        "$SERVER_CPU" "$1" "$(json_field "$out" p50_ms)" "$(json_field "$out" p99_ms)" "$(json_field "$out" p999_ms)" \
        "$(json_field "$out" max_ms)" "$(json_field "$out" over_2x)" "$(json_field "$out" slices)" >>"$extras"
}
stalls "before the runs"

send_body='{"jsonrpc":"2.0","id":{n},"method":"SendMessage","params":{"message":{"messageId":"bench-{n}","role":"ROLE_USER","parts":[{"text":"hello {n}"}]}}}'
V1=(--header "A2A-Version: 1.0")

# One task to read back with GetTask; prints its id.
make_task() {
    curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "$1" \
        -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"seed-1","role":"ROLE_USER","parts":[{"text":"seed"}]}}}' |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["result"]; print((r.get("task") or r)["id"])'
}
get_body() { echo '{"jsonrpc":"2.0","id":{n},"method":"GetTask","params":{"id":"'"$1"'"}}'; }

# The same three scenarios for every echo peer.
peer_scenarios() { # system base_url
    local system="$1" base="$2"
    load "$system" "agent card GET" "$base/.well-known/agent-card.json"
    load "$system" "SendMessage (echo)" "$base/" --method POST --body "$send_body" --rpc-errors "${V1[@]}"
    local task
    task="$(make_task "$base/")"
    load "$system" "GetTask" "$base/" --method POST --body "$(get_body "$task")" --rpc-errors "${V1[@]}"
}

# ---- Countersign ------------------------------------------------------------
if [[ " $SYSTEMS " == *" countersign "* ]]; then
    peer_port="$(free_port)"
    taskset -c "$LOAD_CPU" "$LOADGEN" stub-peer "$peer_port" &
    pids+=("$!")
    port="$(free_port)"
    data="$work/countersign"
    mkdir -p "$data"
    cat >"$data/config.toml" <<TOML
[webhooks]
sweep_secs = 0

[[agents]]
id = "inbox"
backend = "human"

[[agents]]
id = "echo"
name = "Echo"
description = "Echoes the text"
backend = "scripted"

[[agents.skills]]
id = "echo"
name = "Echo"
description = "Repeats the text"
tags = ["echo"]

# Anything but "ping" is echoed (the scripted agent's default when no rule matches).
[[agents.rules]]
text = "^ping$"
steps = [{ reply = "pong" }]

[[peers]]
id = "stub"
url = "http://127.0.0.1:$peer_port/"
TOML
    base="http://127.0.0.1:$port"
    start countersign "$base/a2a/echo/.well-known/agent-card.json" \
        "$CS" serve --data-dir "$data" --bind "127.0.0.1:$port" --config "$data/config.toml"
    token="$(cat "$data/ui-token")"
    load countersign "agent card GET" "$base/a2a/echo/.well-known/agent-card.json"
    load countersign "SendMessage → scripted (completed)" "$base/a2a/echo" \
        --method POST --body "$send_body" --rpc-errors "${V1[@]}"
    load countersign "SendMessage → human (parked, durable)" "$base/a2a/inbox" \
        --method POST --body "$send_body" --rpc-errors "${V1[@]}"
    task="$(make_task "$base/a2a/inbox")"
    load countersign "GetTask" "$base/a2a/inbox" \
        --method POST --body "$(get_body "$task")" --rpc-errors "${V1[@]}"
    sub="$(curl -sf -X POST -H "Authorization: Bearer $token" "$base/api/peers/stub/subscriptions")"
    hook="$(json_field "$sub" url)"
    hook_token="$(json_field "$sub" token)"
    load countersign "webhook push → re-read → parked" "$hook" --method POST \
        --header "A2A-Notification-Token: $hook_token" \
        --body '{"statusUpdate":{"taskId":"pushed-{n}","contextId":"c-{n}","status":{"state":"TASK_STATE_INPUT_REQUIRED"}}}'
    lat="$(taskset -c "$LOAD_CPU" "$LOADGEN" push-latency "$hook" "$hook_token" "$base/api/events?token=$token" "$PUSHES")"
    log "push latency: $lat"
    printf 'countersign\tpush → parked, seen on /api/events (%s pushes, one at a time)\tp50 %s ms, p99 %s ms, max %s ms\n' \
        "$(json_field "$lat" pushes)" "$(json_field "$lat" p50_ms)" "$(json_field "$lat" p99_ms)" "$(json_field "$lat" max_ms)" >>"$extras"
    printf 'countersign\tRSS after all load\t%s MiB\n' "$(mib "$(kib VmRSS "$server_pid")")" >>"$extras"
    stop

    # Pushes acknowledged first ([webhooks] reread_wait_ms = 0): each is
    # answered 202 once its re-read is queued in the outbox, which re-reads
    # and parks it after. Measures the answers, then how long after the load
    # every acknowledged push (warm-up included) is parked.
    port="$(free_port)"
    data="$work/countersign-ack-first"
    mkdir -p "$data"
    sed 's/^sweep_secs = 0$/sweep_secs = 0\nreread_wait_ms = 0/' "$work/countersign/config.toml" >"$data/config.toml"
    base="http://127.0.0.1:$port"
    start countersign-ack-first "$base/a2a/echo/.well-known/agent-card.json" \
        "$CS" serve --data-dir "$data" --bind "127.0.0.1:$port" --config "$data/config.toml"
    token="$(cat "$data/ui-token")"
    sub="$(curl -sf -X POST -H "Authorization: Bearer $token" "$base/api/peers/stub/subscriptions")"
    load countersign "webhook push, acknowledged first (202), re-read after" "$(json_field "$sub" url)" --method POST \
        --header "A2A-Notification-Token: $(json_field "$sub" token)" \
        --body '{"statusUpdate":{"taskId":"pushed-{n}","contextId":"c-{n}","status":{"state":"TASK_STATE_INPUT_REQUIRED"}}}'
    acked="$(json_field "$last_out" ok_total)"
    drained="$(python3 - "$base/api/queue?limit=1" "$token" "$acked" <<'PY'
import json, sys, time, urllib.request
url, token, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
start = time.monotonic()
total = -1
while time.monotonic() - start < 300:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    total = json.load(urllib.request.urlopen(req))["total"]
    if total >= want:
        break
    time.sleep(0.05)
print(f"{total} of {want} parked, {time.monotonic() - start:.2f} s after the load")
PY
)"
    log "ack-first: $drained"
    printf 'countersign\tpushes acknowledged first: %s (load: %s s + %s s warm-up)\t%s\n' "$acked" "$DURATION" "$WARMUP" "$drained" >>"$extras"
    stop

    # Durable SendMessage with `[store] durability = "full"`: each commit is
    # fsynced before its callers are answered (WAL + synchronous=FULL), so a
    # power loss loses nothing acknowledged; with the default ("normal") the
    # checkpoint that follows each commit within 30 ms syncs it.
    port="$(free_port)"
    data="$work/countersign-full"
    mkdir -p "$data"
    printf '[store]\ndurability = "full"\n\n' >"$data/config.toml"
    cat "$work/countersign/config.toml" >>"$data/config.toml"
    base="http://127.0.0.1:$port"
    start countersign-full "$base/a2a/echo/.well-known/agent-card.json" \
        "$CS" serve --data-dir "$data" --bind "127.0.0.1:$port" --config "$data/config.toml"
    load countersign 'SendMessage → human (parked; durability = "full": fsynced before the answer)' "$base/a2a/inbox" \
        --method POST --body "$send_body" --rpc-errors "${V1[@]}"
    stop

    # The queue at QUEUE_TASKS parked tasks: a fresh store filled through
    # SendMessage to the human agent, then the UI's first page.
    port="$(free_port)"
    data="$work/countersign-queue"
    mkdir -p "$data"
    cp "$work/countersign/config.toml" "$data/config.toml"
    base="http://127.0.0.1:$port"
    start countersign-queue "$base/a2a/echo/.well-known/agent-card.json" \
        "$CS" serve --data-dir "$data" --bind "127.0.0.1:$port" --config "$data/config.toml"
    log "filling the queue with $QUEUE_TASKS tasks"
    fill="$(taskset -c "$LOAD_CPU" "$LOADGEN" "$base/a2a/inbox" --method POST --body "$send_body" \
        --rpc-errors "${V1[@]}" --conns "$CONNS" --warmup 0 --duration 3600 --limit "$QUEUE_TASKS")"
    log "filled: $fill"
    token="$(cat "$data/ui-token")"
    total="$(curl -sf -H "Authorization: Bearer $token" "$base/api/queue?limit=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')"
    # What the parked tasks take in the file: its pages as the latest
    # snapshot sees them (the WAL's included), per task.
    stored="$(python3 -c '
import sqlite3, sys
c = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
size = c.execute("PRAGMA page_count").fetchone()[0] * c.execute("PRAGMA page_size").fetchone()[0]
tasks = c.execute("SELECT count(*) FROM tasks").fetchone()[0]
print(f"{size / max(tasks, 1):.0f} bytes a task ({size / 1048576:.1f} MiB)")' "$data/countersign.db")"
    printf 'countersign\tthe store with %s parked tasks\t%s\n' "$total" "$stored" >>"$extras"
    load countersign "queue first page (50 of $total parked)" "$base/api/queue?limit=50&sort=oldest" \
        --header "Authorization: Bearer $token"
    load countersign "queue first page (50 of $total), 1 connection" "$base/api/queue?limit=50&sort=oldest" \
        --header "Authorization: Bearer $token" --conns 1
    printf 'countersign\tRSS with %s parked tasks, after the queue load\t%s MiB\n' "$total" "$(mib "$(kib VmRSS "$server_pid")")" >>"$extras"
    # The same page while tasks keep arriving: half the connections park
    # tasks, half read the first page, so every read follows a commit.
    half=$((CONNS / 2))
    taskset -c "$LOAD_CPU" "$LOADGEN" "$base/a2a/inbox" --method POST --body "${send_body//bench-/beside-}" \
        --rpc-errors "${V1[@]}" --conns "$half" --warmup "$WARMUP" --duration "$DURATION" \
        >"$work/beside.json" 2>"$work/beside.err" &
    sender=$!
    load countersign "queue first page (50 of $total and more), $half connections, while $half park tasks" \
        "$base/api/queue?limit=50&sort=oldest" --header "Authorization: Bearer $token" --conns "$half"
    if wait "$sender"; then
        out="$(cat "$work/beside.json")"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' countersign \
            "SendMessage → human (parked), $half connections, beside those page reads" \
            "$(json_field "$out" rps)" "$(json_field "$out" p50_ms)" "$(json_field "$out" p99_ms)" \
            "$(json_field "$out" errors)" "(the same run)" >>"$results"
    else
        log "the senders beside the page reads failed: $(cat "$work/beside.err")"
    fi
    stop
fi

# ---- the durable floor ------------------------------------------------------
# Not an SDK: the least a server that commits each task before answering does
# (tests/bench/durable-floor), to show what Countersign's own work costs.
if [[ " $SYSTEMS " == *" floor "* ]]; then
    port="$(free_port)"
    start floor "http://127.0.0.1:$port/.well-known/agent-card.json" "$FLOOR" "$port" "$work/floor.db"
    peer_scenarios "minimal durable server (axum + rusqlite, grouped commits)" "http://127.0.0.1:$port"
    stop
fi

# ---- the official SDKs ------------------------------------------------------
if [[ " $SYSTEMS " == *" rust "* ]]; then
    port="$(free_port)"
    start rust-sdk "http://127.0.0.1:$port/.well-known/agent-card.json" "$RUST_ECHO" "$port"
    peer_scenarios "Rust SDK a2a-server-lf (in-memory)" "http://127.0.0.1:$port"
    stop
fi
if [[ " $SYSTEMS " == *" js "* ]]; then
    port="$(free_port)"
    start js-sdk "http://127.0.0.1:$port/.well-known/agent-card.json" node "$here/js/echo_agent.mjs" "$port"
    peer_scenarios "JS SDK @a2a-js/sdk (in-memory)" "http://127.0.0.1:$port"
    stop
fi
if [[ " $SYSTEMS " == *" py-mem "* ]]; then
    port="$(free_port)"
    start py-sdk "http://127.0.0.1:$port/.well-known/agent-card.json" "$venv/bin/python" "$here/python/echo_agent.py" "$port"
    peer_scenarios "Python SDK a2a-sdk (in-memory)" "http://127.0.0.1:$port"
    stop
fi
if [[ " $SYSTEMS " == *" py-sqlite "* ]]; then
    port="$(free_port)"
    start py-sdk-sqlite "http://127.0.0.1:$port/.well-known/agent-card.json" "$venv/bin/python" "$here/python/echo_agent.py" "$port" --sqlite "$work/py-tasks.db"
    peer_scenarios "Python SDK a2a-sdk (SQLite DatabaseTaskStore)" "http://127.0.0.1:$port"
    stop
fi

stalls "after the single runs"

# ---- alternating rounds of SendMessage ---------------------------------------
# Every system again, on fresh stores, started together: SendMessage only,
# each system once per round, the order turned by one each round. Rates go
# to $rounds (round, system, req/s, p99, errors).
rounds="$work/rounds.tsv"
card_rounds="$work/card-rounds.tsv"
: >"$rounds"
: >"$card_rounds"
round_names=()
round_urls=()
round_cards=()
round_start() { # KEY URL CARD_URL CMD...
    local key="$1" url="$2" card="$3"
    shift 3
    quiet_start=1 start "rounds-$key" "$card" "$@"
    round_names+=("$key")
    round_urls+=("$url")
    # The card target is against the Rust SDK; the floor's is a reference.
    case "$key" in countersign | floor | rust) round_cards+=("$card") ;; *) round_cards+=("") ;; esac
}
# round_load ROUND KEY FILE URL [loadgen options]: one system's turn in a
# round, appended to FILE.
round_load() {
    local r="$1" key="$2" file="$3" url="$4"
    shift 4
    local out
    out="$(taskset -c "$LOAD_CPU" "$LOADGEN" "$url" --conns "$CONNS" --warmup 1 \
        --duration "$ROUND_SECONDS" "$@" 2>"$work/loadgen.err")" || {
        log "round $r $key: load generator failed: $(cat "$work/loadgen.err")"
        exit 1
    }
    printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$key" "$(json_field "$out" rps)" \
        "$(json_field "$out" p99_ms)" "$(json_field "$out" errors)" >>"$file"
    log "round $r $key ($(basename "$file" .tsv)): $out"
}
if [ "$ROUNDS" -gt 0 ]; then
    if [[ " $SYSTEMS " == *" countersign "* ]]; then
        port="$(free_port)"
        data="$work/rounds-countersign"
        mkdir -p "$data"
        printf '[webhooks]\nsweep_secs = 0\n\n[[agents]]\nid = "inbox"\nbackend = "human"\n' >"$data/config.toml"
        round_start countersign "http://127.0.0.1:$port/a2a/inbox" \
            "http://127.0.0.1:$port/a2a/inbox/.well-known/agent-card.json" \
            "$CS" serve --data-dir "$data" --bind "127.0.0.1:$port" --config "$data/config.toml"
    fi
    if [[ " $SYSTEMS " == *" countersign "* ]]; then
        port="$(free_port)"
        data="$work/rounds-countersign-full"
        mkdir -p "$data"
        printf '[store]\ndurability = "full"\n\n' >"$data/config.toml"
        cat "$work/rounds-countersign/config.toml" >>"$data/config.toml"
        round_start countersign-full "http://127.0.0.1:$port/a2a/inbox" \
            "http://127.0.0.1:$port/a2a/inbox/.well-known/agent-card.json" \
            "$CS" serve --data-dir "$data" --bind "127.0.0.1:$port" --config "$data/config.toml"
    fi
    if [[ " $SYSTEMS " == *" floor "* ]]; then
        port="$(free_port)"
        round_start floor "http://127.0.0.1:$port/" "http://127.0.0.1:$port/.well-known/agent-card.json" \
            "$FLOOR" "$port" "$work/rounds-floor.db"
    fi
    if [[ " $SYSTEMS " == *" rust "* ]]; then
        port="$(free_port)"
        round_start rust "http://127.0.0.1:$port/" "http://127.0.0.1:$port/.well-known/agent-card.json" \
            "$RUST_ECHO" "$port"
    fi
    if [[ " $SYSTEMS " == *" js "* ]]; then
        port="$(free_port)"
        round_start js "http://127.0.0.1:$port/" "http://127.0.0.1:$port/.well-known/agent-card.json" \
            node "$here/js/echo_agent.mjs" "$port"
    fi
    if [[ " $SYSTEMS " == *" py-sqlite "* ]]; then
        port="$(free_port)"
        round_start py-sqlite "http://127.0.0.1:$port/" "http://127.0.0.1:$port/.well-known/agent-card.json" \
            "$venv/bin/python" "$here/python/echo_agent.py" "$port" --sqlite "$work/rounds-py-tasks.db"
    fi
    n="${#round_names[@]}"
    for ((r = 0; r < ROUNDS; r++)); do
        for ((i = 0; i < n; i++)); do
            k=$(((i + r) % n))
            round_load "$((r + 1))" "${round_names[$k]}" "$rounds" "${round_urls[$k]}" \
                --method POST --body "${send_body//bench-/round$r-}" --rpc-errors "${V1[@]}"
            if [ -n "${round_cards[$k]}" ]; then
                round_load "$((r + 1))" "${round_names[$k]}" "$card_rounds" "${round_cards[$k]}"
            fi
        done
    done
fi

# ---- the table --------------------------------------------------------------
echo
echo "$CONNS connections, ${WARMUP} s warm-up, ${DURATION} s measured; server on CPU $SERVER_CPU, load on CPU $LOAD_CPU"
echo
echo "| system | scenario | req/s | p50 ms | p99 ms | errors | server RSS MiB (peak / after) |"
echo "|---|---|---:|---:|---:|---:|---:|"
awk -F'\t' '{printf "| %s | %s | %.0f | %.2f | %.2f | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7}' "$results"
echo
echo "| system | measure | value |"
echo "|---|---|---|"
awk -F'\t' '{printf "| %s | %s | %s |\n", $1, $2, $3}' "$extras"
if [ -s "$rounds" ]; then
    echo
    python3 - "$rounds" "$card_rounds" "$ROUNDS" "$ROUND_SECONDS" <<'PY'
import statistics, sys
sends, cards, rounds, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


def summarise(path, title, names, targets):
    rate, p99, errors = {}, {}, {}
    for line in open(path):
        r, system, rps, q99, err = line.rstrip("\n").split("\t")
        rate.setdefault(system, {})[int(r)] = float(rps)
        p99.setdefault(system, []).append(float(q99))
        errors[system] = errors.get(system, 0) + int(err)
    if not rate:
        return
    print(title)
    print()
    print("| system | median req/s | lowest–highest | worst p99 ms | errors |")
    print("|---|---:|---:|---:|---:|")
    for system, by_round in rate.items():
        v = list(by_round.values())
        print(f"| {names.get(system, system)} | {statistics.median(v):.0f} | {min(v):.0f}–{max(v):.0f} "
              f"| {max(p99[system]):.2f} | {errors[system]} |")
    print()
    print("| ratio, taken within each round | median | lowest–highest | target |")
    print("|---|---:|---:|---|")
    for a, b, label, target in targets:
        if a not in rate or b not in rate:
            continue
        ratios = [rate[a][r] / rate[b][r] for r in rate[a] if r in rate[b] and rate[b][r] > 0]
        if ratios:
            print(f"| {label} | {statistics.median(ratios):.2f}× | {min(ratios):.2f}×–{max(ratios):.2f}× | {target} |")
    print()


summarise(sends, f"SendMessage in {rounds} alternating rounds of {secs} s, each system once a round:", {
    "countersign": "Countersign, SendMessage → human (parked, durable)",
    "countersign-full": "Countersign, the same with durability = \"full\" (fsynced before the answer)",
    "floor": "minimal durable server",
    "rust": "Rust SDK (in-memory)",
    "js": "JS SDK (in-memory)",
    "py-sqlite": "Python SDK (SQLite)",
}, [
    ("countersign", "rust", "Countersign / Rust SDK", "≥ 1×"),
    ("countersign", "js", "Countersign / JS SDK", "≥ 10×"),
    ("countersign", "py-sqlite", "Countersign / Python SDK on SQLite", "≥ 100×"),
    ("floor", "rust", "minimal durable server / Rust SDK", "(reference)"),
    ("countersign", "floor", "Countersign / minimal durable server", "(reference)"),
    ("countersign-full", "countersign", "Countersign, durability = \"full\" / the default", "(reference)"),
    ("countersign-full", "rust", "Countersign, durability = \"full\" / Rust SDK", "(reference)"),
])
summarise(cards, f"Agent card GET in the same rounds ({secs} s each, right after the system's SendMessage):", {
    "countersign": "Countersign",
    "floor": "minimal durable server",
    "rust": "Rust SDK (in-memory)",
}, [
    ("countersign", "rust", "Countersign / Rust SDK", "≥ 1×"),
    ("floor", "rust", "minimal durable server / Rust SDK", "(reference)"),
])
PY
fi
