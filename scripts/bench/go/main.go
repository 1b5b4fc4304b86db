// nagare-bench-client: the load generators that scripts/bench-peers runs with the same
// settings against a peer broker and against nagare:
//
//	rpc      request/reply: NATS request/reply (nats.go) or STOMP temp-queue RPC (raw STOMP)
//	queue    STOMP persistent queue: SEND with receipt -> one consumer with client acks
//	fanout   STOMP topic fan-out: one producer -> N subscribers
//	forward  Fluentd forward Message mode: one event per request, chunk acks, pipelined
//	txn      Kafka transactional produce (franz-go): begin, produce for D ms, commit
//	txn-consume  Kafka read_committed consume of a topic from its start (franz-go)
//	floor    the loopback round trip with no broker (a relay that only copies bytes)
//
// Each prints a summary and one `RESULT key=value...` line.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "rpc":
		err = rpcMain(args)
	case "queue":
		err = queueMain(args)
	case "fanout":
		err = fanoutMain(args)
	case "forward":
		err = forwardMain(args)
	case "txn":
		err = txnMain(args)
	case "txn-consume":
		err = txnConsumeMain(args)
	case "floor":
		err = floorMain(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: nagare-bench-client rpc|queue|fanout|forward|txn|txn-consume|floor [flags] (-h for each)")
	os.Exit(2)
}

// runTag makes destination names unique per invocation, so a broker's leftovers from an
// earlier run (queued requests, unacked messages) never reach this one.
func runTag() string {
	return fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
}

// withTimeout runs f and fails when it has not returned within d.
func withTimeout(d time.Duration, what string, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return fmt.Errorf("%s: not finished after %s", what, d)
	}
}

func newFlags(name string) *flag.FlagSet {
	return flag.NewFlagSet(name, flag.ExitOnError)
}

// stompBrokerFlags are the flags of every STOMP workload that name the broker it runs
// against: its address, which broker it is, and its name in the summary.
type stompBrokerFlags struct {
	addr, flavor, target *string
}

func addStompBrokerFlags(fs *flag.FlagSet) stompBrokerFlags {
	return stompBrokerFlags{
		addr:   fs.String("addr", "127.0.0.1:61613", "STOMP address"),
		flavor: fs.String("flavor", "nagare", "nagare, rabbitmq or activemq"),
		target: fs.String("target", "", "name of the target in the summary (default: flavor)"),
	}
}

func targetName(flavor, target string) string {
	if target != "" {
		return target
	}
	return strings.ToLower(flavor)
}
