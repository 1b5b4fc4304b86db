#!/usr/bin/env bash
# Builds what the security client tests drive (idempotent; fails loudly when something
# cannot be installed or built):
#   java/target   the Apache Kafka Java client (kafka-clients, Maven Central) over SASL_SSL
#   go/build      franz-go's own pkg/kgo test suite (github.com/twmb/franz-go via the Go
#                 module proxy, version pinned in go/go.mod), compiled to go/build/kgo.test
# The kgo tests create every client with testClientOpts (seeds + KGO_TEST_TLS) but add
# SASL only in their two SCRAM tests; nagare with --auth required refuses clients without
# SASL, so the copy built here gets one added line: with KGO_TEST_SCRAM_ALL set, every test
# client also authenticates with the KGO_TEST_SCRAM user.
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
(
  cd "$here/go"
  go mod download
  version="$(go list -m -f '{{.Version}}' github.com/twmb/franz-go)"
  src="$(go list -m -f '{{.Dir}}' github.com/twmb/franz-go)"
  [ -d "$src/pkg/kgo" ] || { echo "security: franz-go $version not in the module cache" >&2; exit 1; }
  build="$here/go/build"
  copy="$build/franz-go@$version"
  bin="$build/kgo.test"
  if [ ! -x "$bin" ] || [ ! -f "$copy/.patched" ] || [ go.mod -nt "$bin" ] || [ "$here/setup.sh" -nt "$bin" ]; then
    rm -rf "$build"
    mkdir -p "$build"
    cp -r "$src" "$copy"
    chmod -R u+w "$copy"
    helpers="$copy/pkg/kgo/helpers_test.go"
    anchor='		opts = append(opts, DialTLSConfig(testCert))'
    grep -qxF "$anchor" "$helpers" || {
      echo "security: franz-go $version: testClientOpts changed, cannot add SASL" >&2
      exit 1
    }
    # After the TLS option: SASL for every test client when KGO_TEST_SCRAM_ALL is set.
    awk -v anchor="$anchor" '
      { print }
      $0 == anchor { getline; print
        print "\tif saslScram != nil && os.Getenv(\"KGO_TEST_SCRAM_ALL\") != \"\" {"
        print "\t\topts = append(opts, SASL(saslScram))"
        print "\t}" }
    ' "$helpers" > "$helpers.new"
    mv "$helpers.new" "$helpers"
    grep -q KGO_TEST_SCRAM_ALL "$helpers"
    (cd "$copy/pkg/kgo" && go test -c -vet=off -o "$bin" .)
    touch "$copy/.patched"
  fi
  echo "kgo tests of franz-go $version ready: $bin"
)
