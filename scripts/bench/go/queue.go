package main

// STOMP persistent queue: one producer SENDs N messages with `persistent:true` and a
// receipt each, keeping W receipts outstanding (the broker's receipt is its promise the
// message is stored); one consumer, subscribed first with ack:client and a prefetch, ACKs
// cumulatively every A messages and once more at the end, with a receipt. The run ends when
// that last ACK is receipted: every message stored, delivered and acknowledged.

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
)

func queueMain(args []string) error {
	fs := newFlags("queue")
	broker := addStompBrokerFlags(fs)
	n := fs.Int("n", 100000, "messages")
	size := fs.Int("size", 100, "body bytes")
	window := fs.Int("window", 256, "SENDs awaiting their receipt")
	prefetch := fs.Int("prefetch", 1000, "consumer prefetch (prefetch-count, activemq.prefetchSize)")
	ackEvery := fs.Int("ack-every", 100, "cumulative ACK every this many messages")
	timeout := fs.Duration("timeout", 300*time.Second, "abort after this long")
	_ = fs.Parse(args)
	fl, err := flavorByName(*broker.flavor)
	if err != nil {
		return err
	}
	if *n < 1 || *window < 1 || *ackEvery < 1 {
		return fmt.Errorf("n, window and ack-every must be at least 1")
	}
	dest := "/queue/bench-q-" + runTag()
	cons, err := dialStomp(*broker.addr, fl)
	if err != nil {
		return err
	}
	defer cons.Close()
	pf := strconv.Itoa(*prefetch)
	if err := cons.SubscribeReceipted("q", dest, "ack", "client", "prefetch-count", pf, "activemq.prefetchSize", pf); err != nil {
		return err
	}
	prod, err := dialStomp(*broker.addr, fl)
	if err != nil {
		return err
	}
	defer prod.Close()
	body := bytes.Repeat([]byte{'m'}, *size)

	lat := make(Latencies, 0, *n)
	start := time.Now()
	err = withTimeout(*timeout, "queue run", func() error {
		prodErr := make(chan error, 1)
		go func() { prodErr <- queueProduce(prod, dest, body, *n, *window, &lat) }()
		if err := queueConsume(cons, *n, *ackEvery); err != nil {
			return fmt.Errorf("consumer: %w", err)
		}
		if err := <-prodErr; err != nil {
			return fmt.Errorf("producer: %w", err)
		}
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	r := Result{Title: fmt.Sprintf("stomp queue n=%d size=%d window=%d", *n, *size, *window),
		Target: targetName(*broker.flavor, *broker.target), Items: int64(*n), Bytes: int64(*n) * int64(*size),
		Elapsed: elapsed, Lat: lat}
	r.Print()
	prod.Disconnect()
	cons.Disconnect()
	return nil
}

// queueProduce sends with a window of outstanding receipts; receipts come back in order
// (one connection), so the oldest send time is the one a receipt answers.
func queueProduce(s *StompConn, dest string, body []byte, n, window int, lat *Latencies) error {
	sent := make(chan time.Time, window)
	readErr := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if _, err := s.Expect("RECEIPT"); err != nil {
				readErr <- err
				return
			}
			*lat = append(*lat, time.Since(<-sent))
		}
		readErr <- nil
	}()
	for i := 0; i < n; i++ {
		select {
		case sent <- time.Now():
		case err := <-readErr:
			if err == nil {
				err = fmt.Errorf("receipts ended early")
			}
			return err
		}
		s.Mu.Lock()
		err := s.WriteFrame("SEND", body, "destination", dest, "persistent", "true", "receipt", strconv.Itoa(i))
		// Flush when the window is full or the buffer is big: batching SENDs is the
		// client's business, as any real client with pipelined receipts does.
		if err == nil && (len(sent) == cap(sent) || s.W.Buffered() > 32<<10 || i == n-1) {
			err = s.W.Flush()
		}
		s.Mu.Unlock()
		if err != nil {
			return err
		}
	}
	return <-readErr
}

func queueConsume(s *StompConn, n, ackEvery int) error {
	var last string
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
			last, _ = f.Header("ack")
			if got == n {
				break
			}
			if got%ackEvery == 0 {
				if err := s.Send("ACK", nil, "id", last); err != nil {
					return err
				}
			}
		}
	}
	if err := s.Send("ACK", nil, "id", last, "receipt", "last-ack"); err != nil {
		return err
	}
	_, err := s.Expect("RECEIPT")
	return err
}
