// Package kgotests only pins github.com/twmb/franz-go in go.mod/go.sum so that
// `go mod download` brings the module (and its tests) into the module cache;
// test_kafka_java_franz.py then runs franz-go's own pkg/kgo test suite against nagare
// over SASL_SSL (SCRAM-SHA-512 + TLS), driven by KGO_* environment variables.
package kgotests

import _ "github.com/twmb/franz-go/pkg/kgo"
