#!/usr/bin/env bash
# Builds Countersign and starts it. Extra arguments go to `countersign serve`,
# e.g. `scripts/start.sh --config my.toml`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
cargo build --release --no-default-features
exec ./target/release/countersign serve "$@"
