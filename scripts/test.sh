#!/usr/bin/env bash
# Runs the whole test suite: formatting, lints, unit and integration tests
# (real HTTP on 127.0.0.1, real SQLite files, real processes).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
# A one-off build gains nothing from incremental state, which doubles the
# size of target/.
export CARGO_INCREMENTAL=0
# Each stage's wall time, printed at the end (also when a stage fails), so a
# slow CI run says where its time went.
timings=()
stage() {
    local name="$1" start=$SECONDS
    shift
    echo "== $name" >&2
    "$@"
    timings+=("$(printf '%5ds  %s' $((SECONDS - start)) "$name")")
}
# Free disk space too: a build that fills the disk fails in odd ways (a
# linker or `ar` killed by SIGBUS); a cold run leaves about 5 GB in the clone.
free_disk() { df -Ph . | awk 'NR == 2 { print $4 " free on " $6 }'; }
report() {
    local status=$?
    echo "== stage times (total ${SECONDS}s, exit $status; $(free_disk))" >&2
    [ ${#timings[@]} -eq 0 ] || printf '%s\n' "${timings[@]}" >&2
}
trap report EXIT
echo "== disk: $(free_disk)" >&2
stage fmt cargo fmt --all -- --check
# Every build from here on lints as it compiles (scripts/lint-env.sh): all
# targets (tests and benches too) are built once, then the tests run.
. scripts/lint-env.sh
stage "clippy + build" cargo test --no-default-features --all-targets --no-run
stage "cargo test" cargo test --no-default-features
# The scripts below run the binary those tests ran instead of building their
# own (why: scripts/headless-bin.sh).
export COUNTERSIGN_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/countersign"
# Coverage-guided fuzzing of every parser and the markdown renderer, each
# for FUZZ_SECONDS (30 by default) from the corpora in fuzz/corpus/.
stage fuzz bash tests/fuzz/run.sh
# Interop with the official SDK clients (a2a-sdk 1.x and 0.3.26 from PyPI,
# @a2a-js/sdk from npm, the Rust SDK's a2a-client-lf from crates.io) and a
# pre-0.3 client, against the real server.
stage interop bash tests/interop/run.sh
# Watching tasks on real peers built with the official SDKs (Python 1.3.0 and
# 0.3.26, Rust a2a-server-lf over each binding; their own push senders): push
# parks, kill -9 keeps it parked, a forged push is refused, a reply reaches
# the peer exactly once.
stage peers bash tests/peers/watch_flow.sh
# The approval UI: Vitest for its stores and api.ts, then Chromium
# (playwright-core) against a real server; screenshots in tests/ui/output/.
stage ui bash tests/ui/run.sh
# The desktop app in a real window (Xvfb, a private D-Bus session,
# WebKitWebDriver): a task appears, raises one notification,
# is approved by keyboard; the tray count follows; a second launch hands over.
REBUILD_UI=0 stage desktop bash tests/desktop/run.sh
