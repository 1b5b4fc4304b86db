#!/usr/bin/env bash
# A Fluentd forward-protocol receiver to compare with: the OpenTelemetry Collector's
# fluentforwardreceiver (Go module from the Go module proxy) in a small main that counts events
# (fluent-forward/main.go). Loopback only.
#
#   fluent-forward.sh start|stop|status [PORT=24224]   start prints the PID
#   fluent-forward.sh version
#
# Why this receiver: Influent (com.okumin:influent-java) is not served by Maven Central here,
# Fluentd and Fluent Bit are not in Debian bookworm, and RubyGems is out of reach.
# Env: OTEL_VERSION (default v0.164.1). The build needs Go 1.24 or newer.
set -euo pipefail
. "$(dirname "$0")/_lib.sh"
CMD=${1:-start} PORT=${2:-24224}
OTEL=${OTEL_VERSION:-v0.164.1}
SRC=$(cd "$(dirname "$0")/fluent-forward" && pwd)
DIR=$PEERS_STATE/fluent-forward PID=$PEERS_STATE/fluent-forward/ffpeer.pid BIN=$PEERS_STATE/fluent-forward/ffpeer-$OTEL

build() {
  [ -x "$BIN" ] && [ "$BIN" -nt "$SRC/main.go" ] && return
  command -v go >/dev/null || die "needs a Go toolchain (1.24 or newer)"
  # The module is generated under $DIR: its go.sum pins a few hundred modules we never edit.
  mkdir -p "$DIR/src"
  cp "$SRC/main.go" "$DIR/src/main.go"
  ( cd "$DIR/src" && { [ -f go.mod ] || go mod init ffpeer; } &&
    go get "github.com/open-telemetry/opentelemetry-collector-contrib/receiver/fluentforwardreceiver@$OTEL" &&
    go mod tidy && go build -o "$BIN" . ) >"$DIR/build.log" 2>&1 || { tail "$DIR/build.log" >&2; die "go build failed"; }
}

start() {
  if pid_alive "$PID"; then cat "$PID"; return; fi
  build
  busy_check "$PORT"
  setsid "$BIN" "127.0.0.1:$PORT" </dev/null >"$DIR/server.out" 2>&1 &
  echo $! > "$PID"
  wait_port "$PORT" 10 "$PID" || { cat "$DIR/server.out" >&2; die "forward receiver did not start"; }
  cat "$PID"
}

case $CMD in
  start) start ;;
  stop) stop_pid "$PID" 10 ;;
  status) show_status "$PID" fluent-forward ;;
  version) echo "opentelemetry-collector-contrib fluentforwardreceiver $OTEL" ;;
  *) die "usage: $0 start|stop|status [PORT] | version" ;;
esac
