#!/usr/bin/env bash
# Builds Countersign (the UI in ui/, then the server) and starts it. Extra
# arguments go to `countersign serve`, e.g. `scripts/start.sh --config my.toml`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
(cd ui && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build)
cargo build --release --no-default-features
exec ./target/release/countersign serve "$@"
