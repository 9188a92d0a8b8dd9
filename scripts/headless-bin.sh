# Sourced by the test scripts that run `countersign` as a process (interop,
# peers, UI, conformance): sets COUNTERSIGN_BIN to a headless (no desktop
# feature) debug build, building it with Cargo unless the caller already
# named a binary there. scripts/test.sh names the one its `cargo test` build
# made: a plain `cargo build` resolves dependency features without the
# dev-dependencies' and would compile the crate and most of its dependency
# graph a second time.
if [ -z "${COUNTERSIGN_BIN:-}" ]; then
    COUNTERSIGN_BIN="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    cargo build --quiet --no-default-features --manifest-path "$COUNTERSIGN_BIN/Cargo.toml" || return 2
    COUNTERSIGN_BIN="${CARGO_TARGET_DIR:-$COUNTERSIGN_BIN/target}/debug/countersign"
fi
export COUNTERSIGN_BIN
