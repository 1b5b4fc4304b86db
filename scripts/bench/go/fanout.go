package main

// STOMP topic fan-out: S subscribers (ack:auto) on one topic, subscribed and receipted
// first; one producer SENDs N messages without receipts except every R-th, with at most two
// such receipts outstanding (flow control any real publisher needs). The run ends when every
// subscriber has received all N. Reported: deliveries (N x S) per second.

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"time"
)

func fanoutMain(args []string) error {
	fs := newFlags("fanout")
	broker := addStompBrokerFlags(fs)
	n := fs.Int("n", 100000, "messages published")
	subs := fs.Int("subs", 10, "subscribers")
	size := fs.Int("size", 100, "body bytes")
	every := fs.Int("receipt-every", 1000, "a receipt on every this many SENDs")
	timeout := fs.Duration("timeout", 300*time.Second, "abort after this long")
	_ = fs.Parse(args)
	fl, err := flavorByName(*broker.flavor)
	if err != nil {
		return err
	}
	if *n < 1 || *subs < 1 || *every < 1 {
		return fmt.Errorf("n, subs and receipt-every must be at least 1")
	}
	dest := "/topic/bench-fan-" + runTag()
	var conns []*StompConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < *subs; i++ {
		s, err := dialStomp(*broker.addr, fl)
		if err != nil {
			return err
		}
		conns = append(conns, s)
		if err := s.SubscribeReceipted("t", dest, "ack", "auto"); err != nil {
			return err
		}
	}
	prod, err := dialStomp(*broker.addr, fl)
	if err != nil {
		return err
	}
	conns = append(conns, prod)
	body := bytes.Repeat([]byte{'t'}, *size)
	start := time.Now()
	err = withTimeout(*timeout, "fanout run", func() error {
		var wg sync.WaitGroup
		errs := make(chan error, *subs+1)
		for i := 0; i < *subs; i++ {
			wg.Add(1)
			go func(s *StompConn) {
				defer wg.Done()
				if err := fanoutReceive(s, *n); err != nil {
					errs <- fmt.Errorf("subscriber: %w", err)
				}
			}(conns[i])
		}
		if err := fanoutPublish(prod, dest, body, *n, *every); err != nil {
			return fmt.Errorf("producer: %w", err)
		}
		wg.Wait()
		close(errs)
		return <-errs
	})
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	deliveries := int64(*n) * int64(*subs)
	r := Result{Title: fmt.Sprintf("stomp fanout 1->%d n=%d size=%d", *subs, *n, *size),
		Target: targetName(*broker.flavor, *broker.target), Items: deliveries, Bytes: deliveries * int64(*size),
		Elapsed: elapsed,
		Extra:   map[string]string{"published_per_sec": fmt.Sprintf("%.0f", float64(*n)/elapsed.Seconds())}}
	r.Print()
	return nil
}

func fanoutPublish(s *StompConn, dest string, body []byte, n, every int) error {
	const outstanding = 2
	receipts := make(chan error, n/every+2)
	go func() {
		for {
			_, err := s.Expect("RECEIPT")
			receipts <- err
			if err != nil {
				return
			}
		}
	}()
	asked, got := 0, 0
	for i := 0; i < n; i++ {
		h := []string{"destination", dest}
		last := i == n-1
		if (i+1)%every == 0 || last {
			h = append(h, "receipt", strconv.Itoa(i))
			asked++
		}
		if err := s.WriteFrame("SEND", body, h...); err != nil {
			return err
		}
		if (i+1)%every == 0 || last {
			if err := s.W.Flush(); err != nil {
				return err
			}
		}
		for asked-got > outstanding || (last && got < asked) {
			if err := <-receipts; err != nil {
				return err
			}
			got++
		}
	}
	return nil
}

func fanoutReceive(s *StompConn, n int) error {
	for got := 0; got < n; {
		f, err := s.Read()
		if err != nil {
			return err
		}
		switch f.Command {
		case "ERROR":
			return f.errorText()
		case "MESSAGE":
			got++
		}
	}
	return nil
}
