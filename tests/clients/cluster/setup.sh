#!/usr/bin/env bash
# Prepares the cluster-mode tests (idempotent, quick when everything is cached; fails loudly
# when something cannot be had):
#   - the Apache Kafka jars scripts/kafka-cluster runs (Maven Central, through Maven);
#   - go/ackedsender, the acknowledged forward load (github.com/fluent/fluent-logger-golang);
#   - java/classes: the share-group tests' KafkaShareConsumer worker, compiled against the
#     cluster's kafka-clients;
#   - the Python clients the tests import (from requirements.txt, installed by scripts/test).
# The cluster itself starts only when a cluster test runs (a pytest session fixture).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"

if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
  [ "$(id -u)" = 0 ] || { echo "cluster: needs a JDK and Maven (run as root to install them)" >&2; exit 1; }
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven default-jdk-headless >/dev/null
fi
command -v go >/dev/null || { echo "cluster: needs a Go toolchain" >&2; exit 1; }

jars="$("$root/scripts/kafka-cluster" fetch)"
ls "$jars"/kafka_2.13-*.jar "$jars"/kafka-clients-*.jar >/dev/null

(
  cd "$here/go"
  if [ ! -x ackedsender ] || [ -n "$(find . -name '*.go' -newer ackedsender | head -1)" ] \
     || [ go.mod -nt ackedsender ]; then
    go build -o ackedsender .
  fi
)
[ -x "$here/go/ackedsender" ] || { echo "cluster: go/ackedsender was not built" >&2; exit 1; }

src="$here/../share_groups/java/src/nagare"
out="$here/java/classes"
if [ ! -f "$out/nagare/ShareWorker.class" ] || [ -n "$(find "$src" -name '*.java' -newer "$out/nagare/ShareWorker.class" | head -1)" ]; then
  mkdir -p "$out"
  javac -nowarn -d "$out" -cp "$jars/*" "$src"/*.java
fi
[ -f "$out/nagare/ShareWorker.class" ] || { echo "cluster: the Java share worker was not built" >&2; exit 1; }

# The suite's virtualenv when there is one (scripts/test puts it first on PATH too).
py=python3
[ -x "$root/.venv/bin/python" ] && py="$root/.venv/bin/python"
"$py" -c 'import confluent_kafka, stomp, fluent.sender' \
  || { echo "cluster: the Python clients are missing (pip install -r tests/clients/requirements.txt)" >&2; exit 1; }

echo "cluster tests ready: Kafka jars in $jars, $(cd "$here/go" && go version -m ackedsender | grep -o 'fluent-logger-golang[[:space:]]*v[0-9.]*' | tr -s ' \t' ' ')"
