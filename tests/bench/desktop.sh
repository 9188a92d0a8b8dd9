#!/usr/bin/env bash
# The desktop app measured: startup, idle RSS (the app alone and with its
# WebKit processes), and push → parked → OS notification latency. Prints one
# Markdown table in the style of run.sh's second table.
#
#   bash tests/bench/desktop.sh
#
# Builds the UI (if ui/dist is missing), the release desktop app (default
# features, own target dir: target/desktop) and the load generator, then runs,
# in one private D-Bus session under Xvfb, the stand-in notification service
# (tests/desktop/notification_server.py, which records each Notify call with
# its arrival time) and the app pinned to $SERVER_CPU, watching a stub A2A
# peer on $LOAD_CPU. `loadgen push-notify` sends $COUNT webhook pushes for new
# tasks of that peer, one at a time and $GAP_MS apart (more than the app's
# 400 ms grouping window, so each is its own notification), and times each
# from just before its POST to the Notify call recorded for it.
#
# Environment: SERVER_CPU (0), LOAD_CPU (1), COUNT (100), GAP_MS (600),
# IDLE_SECS (5: how long after the first answer idle RSS is read). Needs
# cargo, node ≥ 20 with npm (for the UI), python3 with venv, taskset,
# dbus-run-session, xvfb-run and the Tauri system libraries (see
# tests/desktop/run.sh); the first build takes 15–25 minutes on 2 cores.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
SERVER_CPU="${SERVER_CPU:-0}"
LOAD_CPU="${LOAD_CPU:-1}"
COUNT="${COUNT:-100}"
GAP_MS="${GAP_MS:-600}"
IDLE_SECS="${IDLE_SECS:-5}"
APP="$root/target/desktop/release/countersign"
LOADGEN="$here/target/release/loadgen"
VENV="$root/tests/desktop/.venv"
# The peer's name as the notification's title (set in the config below).
PEER_NAME="Stub peer"

log() { echo "desktop-bench: $*" >&2; }

# ---- inside the session: run and measure -----------------------------------
if [ "${1:-}" = "--in-session" ]; then
    work="$2"
    # Progress to the caller's stderr (fd 3); the session's own chatter
    # (dbus-daemon activations, GTK warnings) goes to $work/session.log.
    log() { echo "desktop-bench: $*" >&3; }
    pids=()
    cleanup() {
        for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
        # The app is not this shell's child (the startup timer spawned it).
        for p in "${pids[@]}"; do
            for _ in $(seq 50); do
                kill -0 "$p" 2>/dev/null || break
                sleep 0.1
            done
        done
        wait 2>/dev/null || true
    }
    trap cleanup EXIT

    free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
    json_field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
    mib() { awk -v v="$1" 'BEGIN {printf "%.1f", v/1024}'; }
    rss_kib() {
        local v
        v="$(awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || true)"
        echo "${v:-0}"
    }
    # A process and all its descendants.
    tree() {
        local p
        echo "$1"
        for p in $(ps -o pid= --ppid "$1"); do tree "$p"; done
    }
    # "RSS_KIB PSS_KIB COUNT NAMES" over the tree below $1: VmRSS summed
    # (shared library pages counted in every process) and PSS summed (shared
    # pages split between the processes that map them).
    tree_mem() {
        local rss=0 pss=0 n=0 names=() p v
        for p in $(tree "$1"); do
            rss=$((rss + $(rss_kib "$p")))
            v="$(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || true)"
            pss=$((pss + ${v:-0}))
            n=$((n + 1))
            [ "$p" = "$1" ] || names+=("$(basename "$(readlink "/proc/$p/exe" 2>/dev/null || echo gone)")")
        done
        echo "$rss $pss $n ${names[*]}"
    }
    extras="$work/extras.tsv"
    : >"$extras"
    row() { printf 'desktop app\t%s\t%s\n' "$1" "$2" >>"$extras"; }
    mem_rows() { # WHEN
        local alone threads rss pss n names
        kill -0 "$app_pid" 2>/dev/null || {
            log "the app exited; its log:"
            tail -n 30 "$work/app.log" >&3
            exit 1
        }
        alone="$(rss_kib "$app_pid")"
        threads="$(awk '/^Threads:/ {print $2}' "/proc/$app_pid/status")"
        read -r rss pss n names <<<"$(tree_mem "$app_pid")"
        row "RSS $1, app process alone ($threads threads)" "$(mib "$alone") MiB"
        row "RSS $1, app + its $((n - 1)) child processes (${names:-none})" "$(mib "$rss") MiB (PSS $(mib "$pss") MiB)"
    }

    record="$work/notifications.jsonl"
    : >"$record"
    taskset -c "$LOAD_CPU" "$VENV/bin/python" "$root/tests/desktop/notification_server.py" "$record" \
        >"$work/notify.out" 2>"$work/notify.err" &
    pids+=("$!")
    for _ in $(seq 100); do
        grep -q ready "$work/notify.out" 2>/dev/null && break
        sleep 0.1
    done
    grep -q ready "$work/notify.out" || {
        log "the notification service did not start: $(cat "$work/notify.err")"
        exit 1
    }

    peer_port="$(free_port)"
    taskset -c "$LOAD_CPU" "$LOADGEN" stub-peer "$peer_port" &
    pids+=("$!")
    port="$(free_port)"
    data="$work/data"
    mkdir -p "$data"
    cat >"$data/config.toml" <<TOML
[webhooks]
sweep_secs = 0

[[agents]]
id = "inbox"
backend = "human"

[[peers]]
id = "stub"
name = "$PEER_NAME"
url = "http://127.0.0.1:$peer_port/"
TOML
    cat >"$data/ui-settings.json" <<'JSON'
{"notifications": {"enabled": true, "sound": false, "onlyWhenHidden": false}}
JSON
    base="http://127.0.0.1:$port"
    export WEBKIT_DISABLE_COMPOSITING_MODE=1 NO_AT_BRIDGE=1
    out="$("$LOADGEN" startup "$base/a2a/inbox/.well-known/agent-card.json" -- \
        sh -c 'exec taskset -c "$0" "$@" >>"'"$work/app.log"'" 2>&1' "$SERVER_CPU" \
        "$APP" --data-dir "$data" --bind "127.0.0.1:$port" --config "$data/config.toml")" || {
        log "the app did not answer; its log:"
        tail -n 30 "$work/app.log" >&3
        exit 1
    }
    app_pid="$(json_field "$out" pid)"
    pids+=("$app_pid")
    log "app up (pid $app_pid, $(json_field "$out" startup_ms) ms to the first card)"
    row "startup to first answer (card 200)" "$(json_field "$out" startup_ms) ms"
    sleep "$IDLE_SECS"
    mem_rows "idle ${IDLE_SECS} s after the first answer"

    token="$(cat "$data/ui-token")"
    sub="$(curl -sf -X POST -H "Authorization: Bearer $token" "$base/api/peers/stub/subscriptions")"
    hook="$(json_field "$sub" url)"
    hook_token="$(json_field "$sub" token)"
    log "push → parked → notification: $COUNT pushes, $GAP_MS ms apart"
    lat="$(taskset -c "$LOAD_CPU" "$LOADGEN" push-notify "$hook" "$hook_token" "$record" "$PEER_NAME" "$COUNT" "$GAP_MS")" || {
        log "push-notify failed; the app's log:"
        tail -n 30 "$work/app.log" >&3
        exit 1
    }
    log "push → notify: $lat"
    row "push → parked → OS notification ($(json_field "$lat" pushes) pushes, ${GAP_MS} ms apart)" \
        "p50 $(json_field "$lat" p50_ms) ms, p99 $(json_field "$lat" p99_ms) ms, max $(json_field "$lat" max_ms) ms"
    row "… of which push → parked (the webhook's 200)" \
        "p50 $(json_field "$lat" http_p50_ms) ms, p99 $(json_field "$lat" http_p99_ms) ms"
    mem_rows "after the latency run"

    {
        echo "Desktop app (release, default features) under Xvfb with a stand-in notification service;"
        echo "app on CPU $SERVER_CPU, stub peer, load generator and notification service on CPU $LOAD_CPU"
        echo
        echo "| system | measure | value |"
        echo "|---|---|---|"
        awk -F'\t' '{printf "| %s | %s | %s |\n", $1, $2, $3}' "$extras"
    } >"$work/table.md"
    exit 0
fi

# ---- build and install ------------------------------------------------------
for c in cargo python3 taskset dbus-run-session xvfb-run curl; do
    command -v "$c" >/dev/null 2>&1 || { log "needs $c (see tests/desktop/run.sh for the packages)"; exit 1; }
done
export CARGO_INCREMENTAL=0
if [ ! -f "$root/ui/dist/index.html" ]; then
    log "building the UI (npm ci, npm run build)"
    (cd "$root/ui" && npm ci --no-audit --no-fund --silent && npm run build --silent)
fi
log "building the desktop app (release, default features, target/desktop)"
(cd "$root" && cargo build --quiet --release --target-dir "$root/target/desktop")
log "building the load generator"
CARGO_TARGET_DIR="$here/target" cargo build --quiet --release --manifest-path "$here/loadgen/Cargo.toml"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -c 'import dbus_next' 2>/dev/null ||
    "$VENV/bin/pip" install --quiet --disable-pip-version-check dbus-next==0.2.3

work="$(mktemp -d "${TMPDIR:-/tmp}/countersign-desktop-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export SERVER_CPU LOAD_CPU COUNT GAP_MS IDLE_SECS
status=0
dbus-run-session -- xvfb-run -a -s "-screen 0 1280x800x24" bash "$0" --in-session "$work" \
    3>&2 >"$work/session.log" 2>&1 || status=$?
if [ "$status" != 0 ]; then
    log "failed ($status); the session's log:"
    tail -n 20 "$work/session.log" >&2
    exit "$status"
fi
echo
cat "$work/table.md"
