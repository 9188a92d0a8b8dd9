#!/usr/bin/env bash
# Builds Countersign (the UI in ui/, then the desktop app with its server)
# and launches the desktop app. Extra arguments go to `countersign`, e.g.
# `scripts/start.sh --config my.toml`; `scripts/start.sh serve …` runs the
# headless server instead.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
(cd ui && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build)
cargo build --release
exec ./target/release/countersign "$@"
