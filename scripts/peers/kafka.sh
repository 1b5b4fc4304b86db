#!/usr/bin/env bash
# Apache Kafka from Maven Central jars (resolved by Maven, no tarball): one KRaft node that is
# broker and controller, loopback only, storage formatted afresh on every start.
#
#   kafka.sh start|stop|status [PORT=9092] [CONTROLLER_PORT=PORT+1]   start prints the broker's PID
#   kafka.sh run MAIN_CLASS ARGS...     any Java tool with the broker's classpath, e.g.
#     kafka.sh run org.apache.kafka.tools.ProducerPerformance --topic t --num-records 1000 ...
#   kafka.sh classpath                  installs the jars if missing and prints the classpath
#   kafka.sh version                    the Kafka version of the jars
#
# Env: KAFKA_VERSION (default 4.3.1: 4.4.0's kafka-tools are not on Maven Central), KAFKA_HEAP_OPTS
# (default -Xms1g -Xmx1g, as kafka-server-start.sh), KAFKA_TOOL_HEAP (default -Xmx512m).
# Facts: the Maven artifacts carry no slf4j binding, so log4j-slf4j-impl is added (without it the
# broker logs nothing, not even the "started" line we wait for). Kafka never fsyncs by default
# (log.flush.* unset) and that default is kept.
set -euo pipefail
. "$(dirname "$0")/_lib.sh"
CMD=${1:-start}
VER=${KAFKA_VERSION:-4.3.1}
DIR=$PEERS_STATE/kafka PID=$PEERS_STATE/kafka/kafka.pid LIBS=$PEERS_STATE/kafka-$VER-libs
# kafka-server-start.sh's JVM flags.
JAVA_OPTS="-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
  -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true"

# The broker (kafka_2.13), the Java tools (kafka-tools) and an slf4j -> log4j2 binding, copied by
# Maven into $LIBS/jars.
fetch_libs() {
  [ -f "$LIBS/.complete" ] && return
  command -v javac >/dev/null || apt_ensure openjdk-17-jdk-headless
  command -v mvn >/dev/null || apt_ensure maven
  mkdir -p "$LIBS"
  cat > "$LIBS/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
  <groupId>nagare.peers</groupId><artifactId>kafka-libs</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$VER</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$VER</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>2.25.4</version></dependency>
  </dependencies>
</project>
POM
  mvn -B -f "$LIBS/pom.xml" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$LIBS/jars" \
    >"$LIBS/mvn.log" 2>&1 || { grep ERROR "$LIBS/mvn.log" | head -5 >&2; die "maven could not fetch kafka $VER"; }
  printf '%s\n' 'rootLogger.level = ${sys:kafka.log.level:-WARN}' 'rootLogger.appenderRef.o.ref = o' \
    'appender.o.type = Console' 'appender.o.name = o' 'appender.o.target = SYSTEM_ERR' \
    'appender.o.layout.type = PatternLayout' 'appender.o.layout.pattern = [%d] %p %m (%c)%n' > "$LIBS/log4j2.properties"
  touch "$LIBS/.complete"
}

kjava() { java -Dlog4j2.configurationFile="$LIBS/log4j2.properties" -cp "$LIBS/jars/*" "$@"; }

start() {
  local port=$1 cport=$2
  if pid_alive "$PID"; then cat "$PID"; return; fi
  fetch_libs
  busy_check "$port" "$cport"
  rm -rf "$DIR/data" && mkdir -p "$DIR/data"
  cat > "$DIR/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$DIR/data
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
PROPS
  kjava kafka.tools.StorageTool format -t "$(kjava kafka.tools.StorageTool random-uuid)" \
    -c "$DIR/server.properties" >/dev/null
  # INFO level so that the readiness line below is logged.
  # shellcheck disable=SC2086
  setsid java ${KAFKA_HEAP_OPTS:--Xms1g -Xmx1g} $JAVA_OPTS -Dkafka.log.level=INFO \
    -Dlog4j2.configurationFile="$LIBS/log4j2.properties" -cp "$LIBS/jars/*" \
    kafka.Kafka "$DIR/server.properties" </dev/null >"$DIR/server.out" 2>&1 &
  echo $! > "$PID"
  local i
  for ((i = 0; i < 900; i++)); do
    grep -q 'Kafka Server started' "$DIR/server.out" && port_open "$port" && { cat "$PID"; return; }
    pid_alive "$PID" || break
    sleep 0.1
  done
  tail -30 "$DIR/server.out" >&2
  die "kafka did not start"
}

case $CMD in
  start) start "${2:-9092}" "${3:-$((${2:-9092} + 1))}" ;;
  stop) stop_pid "$PID" 60 ;;
  status) show_status "$PID" kafka ;;
  run) fetch_libs; shift
    # shellcheck disable=SC2086
    kjava ${KAFKA_TOOL_HEAP:--Xmx512m} -Dkafka.log.level=ERROR "$@" ;;
  classpath) fetch_libs; echo "$LIBS/jars/*" ;;
  version) echo "$VER" ;;
  *) die "usage: $0 start|stop|status [PORT] [CONTROLLER_PORT] | run CLASS ARGS... | classpath | version" ;;
esac
