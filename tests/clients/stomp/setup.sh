#!/usr/bin/env bash
# STOMP clients (idempotent; fails loudly when one cannot be installed):
#   stomp.py, confluent-kafka   tests/clients/requirements.txt (scripts/test installs them)
#   Ruby stomp gem              Debian ruby-stomp (scripts/test apt-installs it as root)
#   stompjs                     npm @stomp/stompjs, pinned in node/package-lock.json
# go-stomp is not installable here (the Go module proxy refuses it).
set -euo pipefail
cd "$(dirname "$0")"
if ! ruby -e 'require "stomp"' 2>/dev/null; then
    if [[ $(id -u) -eq 0 ]]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ruby ruby-stomp >/dev/null
    fi
fi
ruby -e 'require "stomp"; puts "stomp: ruby-stomp #{Stomp::Version::STRING} on ruby #{RUBY_VERSION}"'
command -v npm >/dev/null || { echo "stomp: needs node and npm for stompjs" >&2; exit 1; }
(cd node && { [ -d node_modules/@stomp/stompjs ] || npm ci --no-audit --no-fund --silent; })
node -e 'console.log("stomp: @stomp/stompjs " + require("./node/node_modules/@stomp/stompjs/package.json").version)'
