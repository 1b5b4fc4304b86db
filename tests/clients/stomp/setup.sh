#!/usr/bin/env bash
# STOMP clients: stomp.py and confluent-kafka come from requirements.txt; the Ruby gem is
# Debian's ruby-stomp (scripts/test installs it as root). Fails loudly if missing.
set -euo pipefail
if ! ruby -e 'require "stomp"' 2>/dev/null; then
    if [[ $(id -u) -eq 0 ]]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ruby ruby-stomp >/dev/null
    fi
fi
ruby -e 'require "stomp"; puts "ruby-stomp #{Stomp::Version::STRING} on ruby #{RUBY_VERSION}"'
