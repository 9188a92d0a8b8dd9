#!/usr/bin/env bash
# Runs the whole test suite: formatting, lints, unit and integration tests
# (real HTTP on 127.0.0.1, real SQLite files, real processes).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --no-default-features --all-targets -- -D warnings
cargo test --no-default-features
