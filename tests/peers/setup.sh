#!/usr/bin/env bash
# Installs the peer agents' dependencies (idempotent, quiet):
#   .venv-sdk1   a2a-sdk 1.3.0 + http-server extra + uvicorn  (requirements-sdk1.txt)
#   .venv-sdk03  a2a-sdk 0.3.26 + http-server extra + uvicorn (requirements-sdk03.txt)
#   .venv-fasta2a  fasta2a 2.1.1 + uvicorn (requirements-fasta2a.txt)
#   ../rust_sdk  the Rust SDK peer (cargo)
# A venv is rebuilt only when its pin file changed. Needs python3 (3.10+, with
# venv) and cargo; PyPI and crates.io reachable.
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
    echo "setup: $dir ready"
}

make_venv .venv-sdk1 requirements-sdk1.txt
make_venv .venv-sdk03 requirements-sdk03.txt
make_venv .venv-fasta2a requirements-fasta2a.txt

# The Rust SDK peer (tests/rust_sdk, shared with the interop client; its
# Cargo.lock pins the SDK).
cargo build --quiet --locked --manifest-path ../rust_sdk/Cargo.toml
