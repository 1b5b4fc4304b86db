#!/usr/bin/env bash
# Tools the ops tests need. One independent block per tool: each helper appends its own.
set -euo pipefail

# cargo-deb builds the .deb that test_package.py installs (pinned: the tested version).
CARGO_DEB_VERSION=3.8.0
if ! cargo deb --version 2>/dev/null | grep -qF "$CARGO_DEB_VERSION"; then
    cargo install cargo-deb --locked --version "$CARGO_DEB_VERSION"
fi
cargo deb --version

# Chromium and its WebDriver for test_console.py (the browser test of the web console;
# selenium itself comes from requirements.txt). Debian's packages: no downloads at test time.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
command -v chromium >/dev/null && command -v chromedriver >/dev/null \
    || { echo "chromium/chromium-driver could not be installed" >&2; exit 1; }

