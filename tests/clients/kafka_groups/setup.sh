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
srcs=("$here"/java/src/nagare/*.java)
out="$here/java/classes"
stale=0
for src in "${srcs[@]}"; do
  cls="$out/nagare/$(basename "$src" .java).class"
  if [ ! -f "$cls" ] || [ "$src" -nt "$cls" ]; then stale=1; fi
done
if [ "$stale" = 1 ]; then
  mkdir -p "$out"
  javac -d "$out" -cp "$lib/*" "${srcs[@]}"
fi
echo "kafka group client tests ready: $(ls "$lib"/kafka-clients-*.jar | xargs -n1 basename)"
