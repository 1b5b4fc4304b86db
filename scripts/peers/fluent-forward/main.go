// ffpeer: the OpenTelemetry Collector's fluentforwardreceiver as a standalone forward-protocol
// server (Message, Forward, PackedForward, CompressedPackedForward, chunk acks, UDP heartbeat)
// whose consumer only counts events. It prints "listening ADDR" once bound and, each second
// with traffic, "events total=N (+n/s)".
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/receiver/fluentforwardreceiver"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: ffpeer HOST:PORT")
		os.Exit(2)
	}
	var n atomic.Int64
	cons, err := consumer.NewLogs(func(_ context.Context, ld plog.Logs) error {
		n.Add(int64(ld.LogRecordCount()))
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	f := fluentforwardreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*fluentforwardreceiver.Config)
	cfg.ListenAddress = os.Args[1]
	ctx := context.Background()
	r, err := f.CreateLogs(ctx, receivertest.NewNopSettings(f.Type()), cfg, cons)
	if err == nil {
		err = r.Start(ctx, componenttest.NewNopHost())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("listening", os.Args[1])
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	tick, last := time.NewTicker(time.Second), int64(0)
	for {
		select {
		case <-sig:
			_ = r.Shutdown(ctx)
			fmt.Println("events total", n.Load())
			return
		case <-tick.C:
			if c := n.Load(); c != last {
				fmt.Printf("events total=%d (+%d/s)\n", c, c-last)
				last = c
			}
		}
	}
}
