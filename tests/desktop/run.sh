#!/usr/bin/env bash
# The desktop app end to end, in a real window: builds the UI and the
# desktop binary, then runs tests/desktop.rs under a private D-Bus session
# and Xvfb, driven by WebKitWebDriver, with a stand-in
# notification service (notification_server.py). Installs what it needs:
# Tauri's system libraries, Xvfb, WebKitWebDriver, dbus-next.
# Screenshots land in tests/desktop/output/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

# Build tools, Node and the desktop's libraries (WebKitGTK, GTK, …).
. scripts/setup.sh
# What the real-window tests add: a display, WebKit's WebDriver, a session bus.
need=()
for p in xvfb xauth webkit2gtk-driver dbus-x11; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
    echo "desktop: installing ${need[*]}" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
export PATH="$HOME/.cargo/bin:$PATH"
if [ ! -x "$here/.venv/bin/python" ]; then
    python3 -m venv "$here/.venv"
fi
"$here/.venv/bin/python" -c 'import dbus_next' 2>/dev/null ||
    "$here/.venv/bin/pip" install --quiet dbus-next==0.2.3

# The window loads the built UI.
if [ ! -f ui/dist/index.html ] || [ "${REBUILD_UI:-1}" = 1 ]; then
    (cd ui && npm ci --no-audit --no-fund --silent && npm run build --silent)
fi
# The desktop build lints as it compiles (the app, and tests/desktop.rs when
# the tests build): the rest of the tests and benches are the same code in
# the headless build, which test.sh lints.
. scripts/lint-env.sh
# The test runs the app it builds (CARGO_BIN_EXE_countersign); a separate
# `cargo build` would resolve dependency features without the
# dev-dependencies' and compile the Tauri graph a second time.
cargo test --quiet --test desktop --no-run

mkdir -p "$here/output"
export COUNTERSIGN_DESKTOP_TESTS=1 DESKTOP_PYTHON="$here/.venv/bin/python"
export WEBKIT_DISABLE_COMPOSITING_MODE=1 NO_AT_BRIDGE=1
dbus-run-session -- xvfb-run -a -s "-screen 0 1280x800x24" \
    cargo test --quiet --test desktop -- --test-threads=1 --nocapture
