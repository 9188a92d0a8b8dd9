#!/usr/bin/env bash
# Countersign watching tasks on real peers built with the official SDKs (the
# Python a2a-sdk 1.3.0 and 0.3.26, and the Rust a2a-server-lf serving each of
# its bindings; each with its own push sender), end to end through the CLI:
#   1. `countersign send` starts a `slow` task on the peer (working for 2 s,
#      then input-required); the sweep is off, so only the peer's push can
#      park it here;
#   2. Countersign is killed (-9) and restarted on the same data dir: the
#      task is still parked;
#   3. a forged push (wrong token) is refused;
#   4. `countersign reply` answers; the peer receives the reply exactly once,
#      on the same task, and completes it; our mirror shows completed.
# Then, against each of them again, a send cut short by kill -9 before the
# peer's answer came back (`hold_proxy.py` holds it): after the restart a 1.0
# peer is asked for its task (ListTasks) rather than sent the message twice;
# and a send cut short while the message was still on its way to a 1.0 peer
# (passed on 5 s late) is not sent again while the peer may be taking it;
# and a send whose answer came too late (after 15 s) is kept, and its task
# found on the peer.
# Then a peer built on FastA2A (fasta2a 2.1.1, what pydantic-ai's to_a2a()
# serves), which offers no push notifications and starts a new task for every
# message: a task that asks is parked by following it alone (no push, no
# sweep); the reply reaches the peer once, as a new task in the same context,
# which we mirror and see complete; a plain task completes with its artifact.
# Prints PASS/FAIL lines and `watch-flow: N passed, N failed`; exits 1 on failure.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
"$here/setup.sh" >/dev/null
. "$root/scripts/headless-bin.sh" || exit 2
CLI="$COUNTERSIGN_BIN"
passed=0
failed=0
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; }
trap cleanup EXIT

check() { # description, command...
    local what="$1"; shift
    if "$@"; then echo "PASS $what"; passed=$((passed + 1)); else echo "FAIL $what"; failed=$((failed + 1)); fi
}

wait_line() { # file, prefix -> prints the rest of the first line with that prefix
    for _ in $(seq 200); do
        local v; v="$(sed -n "s/^$2//p" "$1" | head -n1)"
        if [ -n "$v" ]; then echo "$v"; return 0; fi
        sleep 0.05
    done
    return 1
}

start_countersign() { # data dir, config -> sets CS_URL, CS_PID
    "$CLI" serve --config "$2" --data-dir "$1" --bind 127.0.0.1:0 >"$1/stdout" 2>>"$1/server.log" &
    CS_PID=$!
    pids+=("$CS_PID")
    CS_URL="$(wait_line "$1/stdout" 'listening on ')"
}

poll() { # seconds, command... : until the command succeeds
    local deadline=$((SECONDS + $1)); shift
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.2
    done
}

parked() { "$CLI" tasks --parked --json --data-dir "$DATA" | grep -q "\"$TASK\""; }
state_is() { "$CLI" show "$TASK" --json --data-dir "$DATA" | grep -q "\"state\": *\"$1\""; }

rust_peer="$here/../rust_sdk/target/debug/rust-sdk-peer"
start_peer() { # sdk -> sets work, DATA, log, peer_url; fails if the peer does not start
    work="$(mktemp -d)"
    DATA="$work/data"; mkdir -p "$DATA"
    log="$work/peer.jsonl"
    case "$1" in
    rust-*) "$rust_peer" --binding "${1#rust-}" --log "$log" >"$work/peer.out" 2>"$work/peer.err" & ;;
    *) "$here/.venv-$1/bin/python" "$here/peer_agent.py" --port 0 --log "$log" >"$work/peer.out" 2>"$work/peer.err" & ;;
    esac
    pids+=("$!")
    peer_url="$(wait_line "$work/peer.out" 'listening on ')"
}

# The peer SDK, hold_proxy.py in front of it (started with OPTIONS), and
# Countersign watching it through the proxy as `py`.
behind_proxy() { # variant, sdk, options...
    local variant="$1" sdk="$2"
    shift 2
    start_peer "$sdk" || { echo "FAIL [$variant] peer did not start"; failed=$((failed + 1)); return 1; }
    python3 "$here/hold_proxy.py" --upstream "$peer_url" "$@" >"$work/proxy.out" 2>"$work/proxy.err" &
    pids+=("$!")
    proxy_url="$(wait_line "$work/proxy.out" 'listening on ')" || { echo "FAIL [$variant] proxy did not start"; failed=$((failed + 1)); return 1; }
    printf '[webhooks]\nsweep_secs = 0\n\n[[agents]]\nid = "inbox"\n\n[[peers]]\nid = "py"\nurl = "%s"\n' "$proxy_url" >"$work/config.toml"
    start_countersign "$DATA" "$work/config.toml"
}

# A send of "ask for the docs [MARK]" to the peer SDK behind hold_proxy.py
# (started with OPTIONS), and Countersign killed once the proxy printed its
# LINE for it, then started again: sets `cut` to the rest of that line.
cut_short() { # variant, sdk, mark, line, options...
    local variant="$1" sdk="$2" mark="$3" line="$4" sending
    shift 4
    behind_proxy "$variant" "$sdk" "$@" || return 1
    "$CLI" send py "ask for the docs [$mark]" --data-dir "$DATA" >"$work/send.out" 2>&1 &
    sending=$!
    cut="$(wait_line "$work/proxy.out" "$line ")"
    kill -9 "$CS_PID"; wait "$CS_PID" 2>/dev/null
    kill "$sending" 2>/dev/null; wait "$sending" 2>/dev/null
    start_countersign "$DATA" "$work/config.toml"
}

for sdk in sdk1 sdk03 rust-jsonrpc rust-http_json; do
    start_peer "$sdk" || { echo "FAIL [$sdk] peer did not start"; failed=$((failed + 1)); continue; }
    printf '[webhooks]\nsweep_secs = 0\n\n[[agents]]\nid = "inbox"\n\n[[peers]]\nid = "py"\nurl = "%s"\n' "$peer_url" >"$work/config.toml"
    start_countersign "$DATA" "$work/config.toml"

    out="$("$CLI" send py "slow deploy of the docs" --data-dir "$DATA")"
    TASK="$(echo "$out" | sed -n 's/^started task \([^ ]*\) on .*/\1/p')"
    check "[$sdk] a task started on the peer (${TASK:-none})" test -n "$TASK"
    check "[$sdk] the peer's push parks it (no sweep)" poll 20 parked

    kill -9 "$CS_PID"; wait "$CS_PID" 2>/dev/null
    start_countersign "$DATA" "$work/config.toml"
    check "[$sdk] still parked after kill -9 and restart" parked

    sub="$(ls "$DATA" >/dev/null; "$CLI" subscribe py --data-dir "$DATA")"
    url="$(echo "$sub" | sed -n 's/^url: //p')"
    code="$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
        -H 'X-A2A-Notification-Token: forged' -d '{"task":{"id":"x"}}' "$url")"
    check "[$sdk] a forged push is refused ($code)" test "$code" = 401

    check "[$sdk] reply through the CLI" "$CLI" reply "$TASK" "staging" --data-dir "$DATA"
    check "[$sdk] our mirror completes" poll 20 state_is TASK_STATE_COMPLETED
    n="$(grep -c '"duplicate": *false' "$log" 2>/dev/null | tr -d ' ')"
    decisions="$(grep '"duplicate": *false' "$log" | grep -c '"message_id": *"decision-\|"messageId": *"decision-')"
    check "[$sdk] the peer got the reply exactly once ($decisions of $n messages)" test "$decisions" = 1
    if [ "$failed" -gt 0 ]; then
        echo "--- countersign log ($DATA/server.log):"; tail -n 30 "$DATA/server.log"
        echo "--- peer log:"; tail -n 20 "$work/peer.err"; cat "$log"
    fi
done
# A send cut short: the peer took the message, and Countersign is killed
# before the peer's answer reaches it (the proxy holds it). After the restart
# a 1.0 peer is asked for the task that holds the message (ListTasks) and that
# task is parked here: the peer got the message once. Without pushes (the
# proxy hides them) the peer is asked as the send is about to go again; with
# pushes, whose next ones go to the stopped server, it is asked at once,
# well before the send's 30 s wait for a push ends. A 0.3 peer cannot be
# asked, so it is sent the message again (at least once) and holds two tasks.
for variant in sdk1 sdk03 rust-jsonrpc rust-http_json sdk1:pushes rust-jsonrpc:pushes; do
    sdk="${variant%:pushes}"
    pushes=""; [ "$sdk" = "$variant" ] || pushes="--pushes"
    cut_short "$variant" "$sdk" hold held --hold 60 $pushes || continue
    check "[$variant] cut short: the peer took the message, its answer is held (${cut:-none})" test -n "$cut"
    found() { "$CLI" tasks --parked --json --data-dir "$DATA" | grep -q 'ask for the docs \[hold\]'; }
    check "[$variant] cut short: after the restart the peer's task is parked here" poll 20 found
    n="$(grep -c 'ask for the docs \[hold\]' "$log" | tr -d ' ')"
    case "$sdk" in
    sdk03) check "[$variant] cut short: a 0.3 peer, which cannot list its tasks, is sent it again ($n times)" test "$n" = 2 ;;
    *) check "[$variant] cut short: the peer lists its task and is not sent it again ($n time)" test "$n" = 1 ;;
    esac
    if [ "$failed" -gt 0 ]; then
        echo "--- countersign log ($DATA/server.log):"; tail -n 30 "$DATA/server.log"
        echo "--- peer log:"; tail -n 20 "$work/peer.err"; cat "$log"
    fi
done
# A send cut short while the peer is still taking the message: the proxy
# passes it on only 5 s after it came (as to a peer whose agent is slow to
# make its task), and Countersign is killed meanwhile. After the restart a
# 1.0 peer lists no task holding the message yet; it is not sent again while
# the cut-off call would not have timed out, but asked again until its task
# shows, which is parked here: the peer got the message once.
for variant in sdk1 rust-jsonrpc rust-http_json; do
    cut_short "$variant" "$variant" late late --late 5 || continue
    check "[$variant] late: the message is on its way to the peer (${cut:-none})" test -n "$cut"
    found() { "$CLI" tasks --parked --json --data-dir "$DATA" | grep -q 'ask for the docs \[late\]'; }
    check "[$variant] late: once the peer has made its task, it is parked here" poll 14 found
    went="$(wait_line "$work/proxy.out" 'went ')"
    check "[$variant] late: the message reached the peer (${went:-never})" test "$went" = "$cut"
    n="$(grep -c 'ask for the docs \[late\]' "$log" | tr -d ' ')"
    check "[$variant] late: the peer was not sent it again while it was taking it ($n time)" test "$n" = 1
    if [ "$failed" -gt 0 ]; then
        echo "--- countersign log ($DATA/server.log):"; tail -n 30 "$DATA/server.log"
        echo "--- peer log:"; tail -n 20 "$work/peer.err"; cat "$log"
    fi
done
# A send the peer answers too late: the proxy holds its answer 20 s, past
# the call's 15 s, and nothing is killed. `countersign send` says the peer
# may have taken the message and that it is kept; the outbox asks the peer,
# finds its task and parks it here: the peer got the message once.
for variant in sdk1 rust-jsonrpc; do
    behind_proxy "$variant" "$variant" --hold 20 || continue
    out="$("$CLI" send py "ask for the docs [hold]" --data-dir "$DATA" 2>&1)"
    check "[$variant] too late: the sender hears the message is kept" grep -q "so it is kept (delivery start:" <<<"$out"
    found() { "$CLI" tasks --parked --json --data-dir "$DATA" | grep -q 'ask for the docs \[hold\]'; }
    check "[$variant] too late: the peer's task is found and parked here" poll 14 found
    n="$(grep -c 'ask for the docs \[hold\]' "$log" | tr -d ' ')"
    check "[$variant] too late: the peer got the message once ($n time)" test "$n" = 1
    if [ "$failed" -gt 0 ]; then
        echo "--- send: $out"; echo "--- countersign log ($DATA/server.log):"; tail -n 30 "$DATA/server.log"
        echo "--- peer log:"; tail -n 20 "$work/peer.err"; cat "$log"
    fi
done
# FastA2A: no pushes, a new task per message.
work="$(mktemp -d)"
DATA="$work/data"; mkdir -p "$DATA"
log="$work/peer.jsonl"
"$here/.venv-fasta2a/bin/python" "$here/fasta2a_peer.py" --port 0 --log "$log" >"$work/peer.out" 2>"$work/peer.err" &
pids+=("$!")
if peer_url="$(wait_line "$work/peer.out" 'listening on ')" &&
    poll 20 curl -sf "$peer_url/.well-known/agent-card.json"; then
    printf '[webhooks]\nsweep_secs = 0\n\n[[agents]]\nid = "inbox"\n\n[[peers]]\nid = "fa"\nurl = "%s"\n' "$peer_url" >"$work/config.toml"
    start_countersign "$DATA" "$work/config.toml"
    out="$("$CLI" send fa "ask me a colour" --data-dir "$DATA")"
    TASK="$(echo "$out" | sed -n 's/^started task \([^ ]*\) on .*/\1/p')"
    check "[fasta2a] a task started on the peer (${TASK:-none})" test -n "$TASK"
    check "[fasta2a] following it parks it (no push, no sweep)" poll 20 parked
    check "[fasta2a] reply through the CLI" "$CLI" reply "$TASK" "blue" --data-dir "$DATA"
    # The peer's answer to the reply is a new task there: its mirror, here.
    answered() { "$CLI" tasks --json --data-dir "$DATA" >"$work/tasks.json" &&
        ANSWER="$("$here/.venv-fasta2a/bin/python" -c '
import json, sys
items = json.load(open(sys.argv[1]))["items"]
print(next(t["id"] for t in items if t["id"] != sys.argv[2] and t["preview"] == "blue" and t["state"] == "completed"))
' "$work/tasks.json" "$TASK" 2>/dev/null)" && [ -n "$ANSWER" ]; }
    check "[fasta2a] the answer, a new task on the peer, is mirrored and completes" poll 20 answered
    answered
    check "[fasta2a] it says what the peer answered" grep -q "Got your answer: blue" <<<"$("$CLI" show "${ANSWER:-none}" --data-dir "$DATA")"
    check "[fasta2a] the asked task goes on in the answer" grep -q "^continued in ${ANSWER:-none} " <<<"$("$CLI" show "$TASK" --data-dir "$DATA")"
    check "[fasta2a] the answer names the task it continues" grep -q "^continues    $TASK" <<<"$("$CLI" show "${ANSWER:-none}" --data-dir "$DATA")"
    decisions="$(grep -c '"message_id": *"decision-\|"messageId": *"decision-' "$log" | tr -d ' ')"
    check "[fasta2a] the peer got the reply exactly once ($decisions)" test "$decisions" = 1
    out="$("$CLI" send fa "hello there" --watch --data-dir "$DATA")"
    check "[fasta2a] a plain task completes, seen by following it" grep -q "completed" <<<"$out"
    if [ "$failed" -gt 0 ]; then
        echo "--- countersign log ($DATA/server.log):"; tail -n 30 "$DATA/server.log"
        echo "--- peer log:"; tail -n 20 "$work/peer.err"; cat "$log"
    fi
else
    echo "FAIL [fasta2a] peer did not start"; failed=$((failed + 1)); tail -n 20 "$work/peer.err"
fi
echo "watch-flow: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
