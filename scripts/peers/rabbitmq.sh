#!/usr/bin/env bash
# RabbitMQ (Debian's rabbitmq-server, 3.10 on bookworm) with the rabbitmq_stomp plugin, run as a
# foreground node of our own (no systemd, no init script), loopback only, fresh state on every start.
#
#   rabbitmq.sh start|stop|status [STOMP_PORT=61613] [AMQP_PORT=5672]   start prints the PID
#   rabbitmq.sh version
#
# Facts: Erlang daemonizes an epmd on every interface that outlives the node unless one already
# runs, so we start our own on 127.0.0.1 first (and stop it with the node). STOMP 1.1/1.2 clients
# must send `host:/` in CONNECT: RabbitMQ reads that header as the vhost. Replies to
# `reply-to:/temp-queue/NAME` reach the requester without a SUBSCRIBE of its own. Startup takes
# about 5 s.
set -euo pipefail
. "$(dirname "$0")/_lib.sh"
CMD=${1:-start} STOMP_PORT=${2:-61613} AMQP_PORT=${3:-5672}
DIR=$PEERS_STATE/rabbitmq PID=$PEERS_STATE/rabbitmq/rabbitmq.pid EPMD_PID=$PEERS_STATE/rabbitmq/epmd.pid
# Everything the node touches is under $DIR (HOME holds its Erlang cookie).
export HOME=$DIR RABBITMQ_NODENAME=rabbit@localhost RABBITMQ_CONF_ENV_FILE=/dev/null \
  RABBITMQ_CONFIG_FILE=$DIR/rabbitmq.conf RABBITMQ_ENABLED_PLUGINS_FILE=$DIR/enabled_plugins \
  RABBITMQ_MNESIA_BASE=$DIR/mnesia RABBITMQ_LOG_BASE=$DIR/log ERL_EPMD_ADDRESS=127.0.0.1

start() {
  if pid_alive "$PID"; then cat "$PID"; return; fi
  apt_ensure rabbitmq-server
  busy_check "$STOMP_PORT" "$AMQP_PORT" $((AMQP_PORT + 20000))
  rm -rf "$DIR/mnesia" && mkdir -p "$DIR/mnesia" "$DIR/log"
  cat > "$DIR/rabbitmq.conf" <<CONF
listeners.tcp.1 = 127.0.0.1:$AMQP_PORT
stomp.listeners.tcp.1 = 127.0.0.1:$STOMP_PORT
stomp.default_user = guest
stomp.default_pass = guest
distribution.listener.interface = 127.0.0.1
distribution.listener.port_range.min = $((AMQP_PORT + 20000))
distribution.listener.port_range.max = $((AMQP_PORT + 20000))
CONF
  echo '[rabbitmq_stomp].' > "$DIR/enabled_plugins"
  if ! port_open 4369; then
    setsid epmd -address 127.0.0.1 </dev/null >"$DIR/epmd.out" 2>&1 &
    echo $! > "$EPMD_PID"
  fi
  setsid /usr/lib/rabbitmq/bin/rabbitmq-server </dev/null >"$DIR/server.out" 2>&1 &
  echo $! > "$PID"
  wait_port "$STOMP_PORT" 90 "$PID" || { tail -30 "$DIR/server.out" >&2; die "rabbitmq did not start"; }
  cat "$PID"
}

case $CMD in
  start) start ;;
  # rabbitmq-server is a shell wrapper that traps TERM and stops beam cleanly.
  stop) stop_pid "$PID" 60; stop_pid "$EPMD_PID" 5 ;;
  status) show_status "$PID" rabbitmq ;;
  version) apt_ensure rabbitmq-server; dpkg-query -W -f='${Version}\n' rabbitmq-server ;;
  *) die "usage: $0 start|stop|status [STOMP_PORT] [AMQP_PORT] | version" ;;
esac
