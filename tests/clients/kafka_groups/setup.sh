#!/usr/bin/env bash
# Needs kcat and builds the Java group consumer against the kafka-clients jars that
# tests/clients/kafka/setup.sh fetches from Maven Central (that script runs first; it is
# run here too if its jars are missing). Idempotent; fails loudly.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
lib="$here/../kafka/java/target/lib"
if ! ls "$lib"/kafka-clients-*.jar >/dev/null 2>&1 || ! command -v kcat >/dev/null; then
  bash "$here/../kafka/setup.sh"
fi
ls "$lib"/kafka-clients-*.jar >/dev/null
command -v kcat >/dev/null || { echo "kcat is missing" >&2; exit 1; }
src="$here/java/src/nagare/GroupConsumer.java"
out="$here/java/classes"
if [ ! -f "$out/nagare/GroupConsumer.class" ] || [ "$src" -nt "$out/nagare/GroupConsumer.class" ]; then
  mkdir -p "$out"
  javac -d "$out" -cp "$lib/*" "$src"
fi
echo "kafka group client tests ready: $(ls "$lib"/kafka-clients-*.jar | xargs -n1 basename)"
