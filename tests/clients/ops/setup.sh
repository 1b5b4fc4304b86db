#!/usr/bin/env bash
# Tools the ops tests need. One independent block per tool: each helper appends its own.
set -euo pipefail

# cargo-deb builds the .deb that test_package.py installs (pinned: the tested version).
CARGO_DEB_VERSION=3.8.0
if ! cargo deb --version 2>/dev/null | grep -qF "$CARGO_DEB_VERSION"; then
    cargo install cargo-deb --locked --version "$CARGO_DEB_VERSION"
fi
cargo deb --version
