#!/usr/bin/env bash
# Builds what the security client tests drive (idempotent; fails loudly when something
# cannot be installed or built):
#   java/target   the Apache Kafka Java client (kafka-clients, Maven Central) over SASL_SSL
#   go/build      franz-go's own pkg/kgo test suite: links to the one test binary (and its
#                 source tree) that scripts/compat/franz-go builds for the ecosystem tests
#                 too, with SASL for every test client when KGO_TEST_SCRAM_ALL is set.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven default-jdk-headless
fi
command -v go >/dev/null || { echo "security: needs a Go toolchain" >&2; exit 1; }

echo "security: java client (kafka-clients, SASL_SSL)"
(
  cd "$here/java"
  cls=target/classes/nagare/SaslSslClientTest.class
  if [ ! -f "$cls" ] || [ ! -d target/lib ] \
     || [ src/main/java/nagare/SaslSslClientTest.java -nt "$cls" ] || [ pom.xml -nt "$cls" ]; then
    mvn -q -B -Dstyle.color=never package -DskipTests
  fi
  ls target/lib/kafka-clients-*.jar >/dev/null
)

echo "security: franz-go kgo test suite"
# Built once, for the ecosystem tests too, by scripts/compat/franz-go (version pinned there,
# with the KGO_TEST_SCRAM_ALL line); test_kafka_java_franz.py finds it under go/build.
built="$(bash "$here/../../../scripts/compat/franz-go" --build-only)"
# "franz-go VERSION kgo test binary: PATH"; the source tree it runs in is beside it.
version="$(sed -n 's/^franz-go \([^ ]*\) kgo test binary: .*/\1/p' <<<"$built")"
bin="${built##*kgo test binary: }"
[ -n "$version" ] && [ -x "$bin" ] && [ -d "$(dirname "$bin")/franz-go-$version/pkg/kgo" ] || {
  echo "security: franz-go build gave no test binary: $built" >&2
  exit 1
}
build="$here/go/build"
rm -rf "$build"
mkdir -p "$build"
ln -s "$bin" "$build/kgo.test"
ln -s "$(dirname "$bin")/franz-go-$version" "$build/franz-go@$version"
echo "kgo tests of franz-go $version ready: $build/kgo.test"
