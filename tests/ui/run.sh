#!/usr/bin/env bash
# The approval UI's tests: Vitest for the stores and api.ts, then the
# end-to-end browser tests (playwright-core driving Debian's chromium)
# against a real `countersign serve`. Installs chromium if it is missing.
# Screenshots and measurements land in tests/ui/output/.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/setup.sh

if [ ! -x /usr/bin/chromium ]; then
    echo "ui tests: installing chromium" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

(cd ui && npm ci --no-audit --no-fund --loglevel=error && npm run --silent check && npm run --silent build && npx vitest run)

. scripts/headless-bin.sh

mkdir -p tests/ui/output
node --test --test-concurrency=1 tests/ui/e2e.test.mjs tests/ui/perf.test.mjs
echo "ui tests: screenshots and measurements in tests/ui/output/" >&2
