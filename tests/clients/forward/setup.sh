#!/usr/bin/env bash
# Installs the non-Python forward-protocol senders the pytest tests drive (idempotent;
# fails loudly when something cannot be installed):
#   go/forwardsender   github.com/fluent/fluent-logger-golang (via the Go module proxy)
#   node/node_modules  @fluent-org/logger (npm)
#   java/target        org.komamitsu:fluency-fluentd (Maven Central), compiled with javac
set -euo pipefail
cd "$(dirname "$0")"

command -v go >/dev/null || { echo "forward: needs a Go toolchain" >&2; exit 1; }
command -v npm >/dev/null || { echo "forward: needs node and npm" >&2; exit 1; }
command -v mvn >/dev/null && command -v javac >/dev/null || {
    echo "forward: needs a JDK and Maven" >&2
    exit 1
}

echo "forward: go sender (fluent-logger-golang)"
(cd go && go build -o forwardsender .)

echo "forward: node sender (@fluent-org/logger)"
(cd node && { [ -d node_modules/@fluent-org/logger ] || npm ci --no-audit --no-fund --silent; })

echo "forward: java sender (fluency)"
(
    cd java
    if [ ! -f target/lib/.complete ]; then
        mvn -q -B -Dstyle.color=never dependency:copy-dependencies -DoutputDirectory=target/lib
        touch target/lib/.complete
    fi
    mkdir -p target/classes
    javac -d target/classes -cp "target/lib/*" src/main/java/ForwardSender.java
)
