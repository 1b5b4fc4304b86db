#!/usr/bin/env bash
# Builds what the ecosystem tests drive: unmodified Kafka Streams 4.3.1 and Kafka Connect 4.3.1
# (connect-runtime, connect-file, connect-json) from Maven Central, with the small command
# loops in java/src. Idempotent; fails loudly when something cannot be installed or built.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven default-jdk-headless
fi

cd "$here/java"
stamp=target/classes/nagare/ConnectWorker.class
rebuild=0
[ -f "$stamp" ] && [ -d target/lib ] || rebuild=1
[ pom.xml -nt "$stamp" ] && rebuild=1
while IFS= read -r f; do
  [ "$f" -nt "$stamp" ] && rebuild=1
done < <(find src -type f)
if [ "$rebuild" = 1 ]; then
  mvn -q -B package -DskipTests
fi
for a in kafka-streams connect-runtime connect-file connect-json; do
  ls target/lib/"$a"-4.3.1.jar >/dev/null
done


# franz-go's kgo test suite (Go module proxy), compiled once into target/compat/franz-go.
command -v go >/dev/null || { echo "go is required for the franz-go suite" >&2; exit 1; }
bash "$here/../../../scripts/compat/franz-go" --build-only
echo "ecosystem tests ready: Kafka Streams and Connect 4.3.1 in $here/java/target, franz-go kgo.test"
