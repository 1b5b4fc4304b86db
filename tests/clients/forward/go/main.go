// Sends events to a forward receiver with github.com/fluent/fluent-logger-golang, as a
// pytest test drives it: forwardsender HOST PORT TAG COUNT [ack]. Each event is
// {"seq": i, "msg": "..."} with an event time of 1700000000+i seconds and i*1000 ns.
// With FORWARD_TLS=1 in the environment it connects over TLS (the server is verified
// against the system roots, or the CA file SSL_CERT_FILE names).
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/fluent/fluent-logger-golang/fluent"
)

func main() {
	if len(os.Args) < 5 {
		fmt.Fprintln(os.Stderr, "usage: forwardsender HOST PORT TAG COUNT [ack]")
		os.Exit(2)
	}
	port, _ := strconv.Atoi(os.Args[2])
	count, _ := strconv.Atoi(os.Args[4])
	ack := len(os.Args) > 5 && os.Args[5] == "ack"
	logger, err := fluent.New(fluent.Config{
		FluentHost:         os.Args[1],
		FluentPort:         port,
		FluentNetwork:      network(),
		RequestAck:         ack,
		SubSecondPrecision: true,
		Timeout:            10 * time.Second,
		WriteTimeout:       10 * time.Second,
		MaxRetry:           3,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		os.Exit(1)
	}
	for i := 0; i < count; i++ {
		ts := time.Unix(1700000000+int64(i), int64(i)*1000)
		rec := map[string]interface{}{"seq": i, "msg": fmt.Sprintf("go event %d", i)}
		if err := logger.PostWithTime(os.Args[3], ts, rec); err != nil {
			fmt.Fprintln(os.Stderr, "post:", err)
			os.Exit(1)
		}
	}
	if err := logger.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
		os.Exit(1)
	}
	fmt.Println("sent", count)
}

func network() string {
	if os.Getenv("FORWARD_TLS") == "1" {
		return "tls"
	}
	return "tcp"
}
