#!/usr/bin/env bash
# Checks every peer variant end to end, and records what each SDK sends on push:
#   tests/peers/check_peer.sh            # setup.sh, then all variants
#   tests/peers/check_peer.sh -v         # ... with request/response and peer logs on stderr
#   REPORT=/tmp/push.jsonl tests/peers/check_peer.sh   # keep the JSON report of push details
# Each variant starts `peer_agent.py --port 0` (127.0.0.1 only) and a webhook receiver
# (http.server on 127.0.0.1:0), sends `ask deploy` with an inline push config (token t0k3n,
# authentication Bearer c0ffee), checks the POSTs, follows up, and runs the other flows
# (see check_peer.py). Then the official SDK clients of both venvs talk to both peers.
# Prints PASS/FAIL lines and a closing `N passed, N failed`; exit status 1 if anything failed.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
./setup.sh || exit 2

V1=.venv-sdk1/bin/python
V03=.venv-sdk03/bin/python
report="${REPORT:-$(mktemp -t peer-push-report.XXXXXX)}"
out="$(mktemp -t peer-check-out.XXXXXX)"
pids=()
tmpfiles=("$out")
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -f "${tmpfiles[@]}"
}
trap cleanup EXIT

run() { echo; echo "## $*"; "$@" 2>&1 | tee -a "$out"; }

run "$V1" peer_agent.py --sdk-check
run "$V03" peer_agent.py --sdk-check

# Raw HTTP flows (as Countersign speaks them) against each peer, with the push receiver.
run "$V1" check_peer.py --peer-python "$V1" --dialect v1-jsonrpc --name sdk1-v1.0-jsonrpc --report "$report" "$@"
run "$V1" check_peer.py --peer-python "$V1" --dialect v1-rest --name sdk1-v1.0-rest --report "$report" "$@"
run "$V1" check_peer.py --peer-python "$V1" --dialect v03-jsonrpc --name sdk1-v0.3compat-jsonrpc --report "$report" "$@"
run "$V1" check_peer.py --peer-python "$V03" --dialect v03-jsonrpc --name sdk03-v0.3-jsonrpc --report "$report" "$@"
run "$V1" check_peer.py --peer-python "$V03" --peer-arg=--stock-push --expect-auth no \
    --dialect v03-jsonrpc --name sdk03-stockpush --report "$report" "$@"

# The official SDK clients against both peers (a2a-sdk 1.x: v1.0 and its v0.3 compat; 0.3.26).
for peer in sdk1 sdk03; do
    py="$V1"; [ "$peer" = sdk03 ] && py="$V03"
    log="$(mktemp -t peer-$peer.XXXXXX)"
    tmpfiles+=("$log" "$log.err")
    "$py" peer_agent.py --port 0 >"$log" 2>"$log.err" &
    pids+=($!)
    for _ in $(seq 100); do grep -q '^listening on ' "$log" 2>/dev/null && break; sleep 0.1; done
    base="$(sed -n 's/^listening on //p' "$log" | head -n1)"
    if [ -z "$base" ]; then
        echo "FAIL $peer peer did not start: $(cat "$log.err")" | tee -a "$out"
        continue
    fi
    run "$V1" sdk_client_check.py "$base" --name "client-sdk1-auto->peer-$peer"
    run "$V1" sdk_client_check.py "$base" --name "client-sdk1-0.3->peer-$peer" --dialect 0.3
    run "$V03" sdk_client_check.py "$base" --name "client-sdk03->peer-$peer"
done

passed=$(grep -c '^PASS ' "$out")
failed=$(grep -c '^FAIL ' "$out")
echo
echo "# push report (JSON lines): $report"
echo "peers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
