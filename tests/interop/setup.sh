#!/usr/bin/env bash
# Installs the interop clients' dependencies (idempotent, quiet):
#   .venv-sdk1   a2a-sdk 1.x  (requirements-sdk1.txt)
#   .venv-sdk03  a2a-sdk 0.3.26 (requirements-sdk03.txt)
#   node_modules @a2a-js/sdk (package-lock.json, `npm ci`)
#   ../rust_sdk  the Rust SDK's client, a2a-client-lf (its Cargo.lock; cargo)
# A venv / node_modules is rebuilt only when its pin file changed.
# Needs python3 (3.10+, with venv), node 20+/npm and cargo; PyPI, npm and
# crates.io reachable.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
PYTHON="${PYTHON:-python3}"

stamp_of() { sha256sum "$1" | cut -d' ' -f1; }

make_venv() { # dir requirements
    local dir="$1" req="$2" want
    want="$(stamp_of "$req")"
    if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$want" ]; then
        return 0
    fi
    rm -rf "$dir"
    "$PYTHON" -m venv "$dir"
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$req"
    echo "$want" >"$dir/.stamp"
    echo "setup: $dir ready ($("$dir/bin/python" -c 'import importlib.metadata as m; print("a2a-sdk", m.version("a2a-sdk"))'))"
}

make_venv .venv-sdk1 requirements-sdk1.txt
make_venv .venv-sdk03 requirements-sdk03.txt

want="$(stamp_of package-lock.json)"
if [ ! -d node_modules/@a2a-js/sdk ] || [ "$(cat node_modules/.stamp 2>/dev/null)" != "$want" ]; then
    npm ci --silent --no-audit --no-fund --ignore-scripts >/dev/null
    echo "$want" >node_modules/.stamp
    echo "setup: node_modules ready (@a2a-js/sdk $(node -p 'require("./node_modules/@a2a-js/sdk/package.json").version'))"
fi

# Cargo rebuilds only what changed; --locked keeps the SDK at its pinned version.
cargo build --quiet --locked --manifest-path ../rust_sdk/Cargo.toml
