#!/usr/bin/env bash
# nats-server (Debian's nats-server, 2.9 on bookworm), loopback only, no JetStream, no monitoring
# port. Fresh state on every start (core NATS keeps none).
#
#   nats.sh start|stop|status [PORT=4222]     start prints the PID
#   nats.sh version
set -euo pipefail
. "$(dirname "$0")/_lib.sh"
CMD=${1:-start} PORT=${2:-4222}
DIR=$PEERS_STATE/nats PID=$PEERS_STATE/nats/nats.pid

start() {
  if pid_alive "$PID"; then cat "$PID"; return; fi
  apt_ensure nats-server
  busy_check "$PORT"
  mkdir -p "$DIR"
  setsid nats-server -a 127.0.0.1 -p "$PORT" -l "$DIR/nats.log" </dev/null >"$DIR/server.out" 2>&1 &
  echo $! > "$PID"
  wait_port "$PORT" 10 "$PID" || { tail -20 "$DIR/nats.log" >&2; die "nats-server did not start"; }
  cat "$PID"
}

case $CMD in
  start) start ;;
  stop) stop_pid "$PID" 10 ;;
  status) show_status "$PID" nats ;;
  version) apt_ensure nats-server; nats-server --version ;;
  *) die "usage: $0 start|stop|status [PORT] | version" ;;
esac
