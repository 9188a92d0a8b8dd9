#!/usr/bin/env bash
# Sourced by test.sh (and tests/desktop/run.sh): lint while building.
# clippy-driver compiles this workspace's own crates in place of rustc —
# what `cargo clippy` runs, but with code generation — so linting needs no
# second, check-only pass over every dependency (those still build with
# plain rustc, shared with any other build). Warnings, rustc's and
# Clippy's, are errors. CLIPPY_ARGS is how cargo-clippy passes its
# arguments to clippy-driver; cargo rebuilds a crate when it changes.
driver="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver || true)"
if [ -z "$driver" ]; then
    echo "lint: clippy-driver not found (rustup component add clippy)" >&2
    exit 2
fi
export RUSTC_WORKSPACE_WRAPPER="$driver"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
