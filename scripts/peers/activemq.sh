#!/usr/bin/env bash
# ActiveMQ "classic" (Debian's activemq, 5.17 on bookworm), STOMP only (stomp+nio), loopback,
# fresh KahaDB on every start.
#
#   activemq.sh start|stop|status [STOMP_PORT=61614]   start prints the PID
#   activemq.sh version
#
# Env: ACTIVEMQ_HEAP (default "-Xms512m -Xmx512m", as Debian's activemq-options).
# Facts: Debian's wrapper and init script are bypassed (java is exec'd directly, so $! is the
# broker); its log4j setup prints "No appenders" warnings and logs nothing, which is harmless.
# Temp queues differ from RabbitMQ's: the responder sees `reply-to:/remote-temp-queue/ID:...` and
# the requester must SUBSCRIBE to `/temp-queue/NAME` itself or the reply is never delivered.
set -euo pipefail
. "$(dirname "$0")/_lib.sh"
CMD=${1:-start} PORT=${2:-61614}
DIR=$PEERS_STATE/activemq PID=$PEERS_STATE/activemq/activemq.pid
AMQ_HOME=/usr/share/activemq

start() {
  if pid_alive "$PID"; then cat "$PID"; return; fi
  apt_ensure activemq
  busy_check "$PORT"
  rm -rf "$DIR/data" && mkdir -p "$DIR/conf" "$DIR/data"
  cat > "$DIR/conf/activemq.xml" <<XML
<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="peer" useJmx="false" dataDirectory="$DIR/data">
    <persistenceAdapter><kahaDB directory="$DIR/data/kahadb"/></persistenceAdapter>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp+nio://127.0.0.1:$PORT"/>
    </transportConnectors>
  </broker>
</beans>
XML
  # Debian's /usr/bin/activemq JVM flags, java exec'd directly.
  # shellcheck disable=SC2086
  setsid java ${ACTIVEMQ_HEAP:--Xms512m -Xmx512m} -Dorg.apache.activemq.UseDedicatedTaskRunner=true \
    --add-reads=java.xml=java.logging --add-opens java.base/java.lang=ALL-UNNAMED \
    --add-opens java.base/java.util=ALL-UNNAMED --add-opens java.base/java.net=ALL-UNNAMED \
    --add-opens java.base/java.security=ALL-UNNAMED \
    -Dactivemq.home=$AMQ_HOME -Dactivemq.base="$DIR" -Dactivemq.conf="$DIR/conf" \
    -Dactivemq.data="$DIR/data" -Dactivemq.classpath="$DIR/conf" \
    -jar $AMQ_HOME/bin/activemq.jar start "xbean:file:$DIR/conf/activemq.xml" \
    </dev/null >"$DIR/server.out" 2>&1 &
  echo $! > "$PID"
  wait_port "$PORT" 60 "$PID" || { tail -30 "$DIR/server.out" >&2; die "activemq did not start"; }
  cat "$PID"
}

case $CMD in
  start) start ;;
  stop) stop_pid "$PID" 30 ;;
  status) show_status "$PID" activemq ;;
  version) apt_ensure activemq; dpkg-query -W -f='${Version}\n' activemq ;;
  *) die "usage: $0 start|stop|status [STOMP_PORT] | version" ;;
esac
