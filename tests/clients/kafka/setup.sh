#!/usr/bin/env bash
# Installs and builds what the Kafka client tests drive: kcat (Debian), the Python clients
# (requirements.txt, installed by scripts/test), and the Java client test (Maven Central).
# Idempotent; fails loudly when something cannot be installed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

if ! command -v kcat >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat
fi
if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven default-jdk-headless
fi
command -v kcat >/dev/null || { echo "kcat could not be installed" >&2; exit 1; }

cd "$here/java"
# Rebuild when any source (or the pom) is newer than the last build.
stamp=target/.built
if [ ! -f "$stamp" ] || [ ! -d target/lib ] \
   || [ -n "$(find src pom.xml -newer "$stamp" -type f | head -1)" ]; then
  mvn -q -B package -DskipTests
  touch "$stamp"
fi
ls target/lib/kafka-clients-*.jar >/dev/null
echo "kafka client tests ready: kcat $(kcat -V 2>&1 | grep -o 'librdkafka [0-9.]*' | head -1), java client in $here/java/target"
