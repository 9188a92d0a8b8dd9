#!/usr/bin/env bash
# Installs what building Countersign needs on Debian/Ubuntu, if missing:
# a C toolchain and pkg-config (SQLite is compiled in), the desktop app's
# system libraries (WebKitGTK, GTK, appindicator), Node.js for the UI, and a
# Rust toolchain.
# Sourced by start.sh and test.sh.
set -euo pipefail

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
command -v cc >/dev/null 2>&1 || missing+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
command -v curl >/dev/null 2>&1 || missing+=(curl ca-certificates)
# The interop tests run the official Python and JS SDK clients.
command -v python3 >/dev/null 2>&1 || missing+=(python3)
python3 -c "import ensurepip, venv" >/dev/null 2>&1 || missing+=(python3-venv)
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
command -v xz >/dev/null 2>&1 || missing+=(xz-utils)
# The desktop app (Tauri): WebKitGTK, GTK, the tray's appindicator.
for p in libwebkit2gtk-4.1-dev libgtk-3-dev libsoup-3.0-dev librsvg2-dev \
         libayatana-appindicator3-dev libssl-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: installing the Rust toolchain (rustup)" >&2
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt,clippy
    export PATH="$HOME/.cargo/bin:$PATH"
fi

# The UI (ui/) is built with Vite 7, which needs Node.js 20.19 or newer; older
# distributions ship an older one. Then the latest Node 20 from nodejs.org is
# unpacked (checksum verified) into ~/.local/share/countersign/node.
node_ok() {
    command -v node >/dev/null 2>&1 && node -e '
        const [a, b] = process.versions.node.split(".").map(Number);
        process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'
}
node_dir="$HOME/.local/share/countersign/node"
if ! node_ok && [ -x "$node_dir/bin/node" ]; then
    export PATH="$node_dir/bin:$PATH"
fi
if ! node_ok; then
    case "$(uname -m)" in
        x86_64) node_arch=x64 ;;
        aarch64 | arm64) node_arch=arm64 ;;
        *) echo "setup: no Node.js 20 build for $(uname -m); install Node.js 20.19+ yourself" >&2; exit 2 ;;
    esac
    echo "setup: installing Node.js 20 for the UI build (found $(node --version 2>/dev/null || echo none))" >&2
    dist=https://nodejs.org/dist/latest-v20.x
    line=$(curl -fsSL "$dist/SHASUMS256.txt" | grep " node-v20\.[0-9.]*-linux-$node_arch\.tar\.xz\$")
    file=${line##* }
    tmp=$(mktemp -d)
    curl -fsSL -o "$tmp/$file" "$dist/$file"
    (cd "$tmp" && echo "$line" | sha256sum -c --quiet -)
    rm -rf "$node_dir" && mkdir -p "$node_dir"
    tar -xJf "$tmp/$file" -C "$node_dir" --strip-components=1
    rm -rf "$tmp"
    export PATH="$node_dir/bin:$PATH"
fi
