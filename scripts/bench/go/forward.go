package main

// Fluentd forward Message mode, the fluent-logger default shape: one event per request,
// `[tag, EventTime, record, {"chunk": id}]`. With the chunk option the receiver acks each
// event once it has taken it ({"ack": id}), as fluent-logger does with
// require_ack_response; C connections each keep W requests in flight (pipelining), acks
// come back in order. Events are counted when acked.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

func forwardMain(args []string) error {
	fs := newFlags("forward")
	addr := fs.String("addr", "127.0.0.1:24224", "forward receiver address")
	target := fs.String("target", "nagare", "name of the target in the summary")
	c := fs.Int("c", 4, "connections")
	n := fs.Int("n", 1000000, "events in total")
	size := fs.Int("size", 100, "approximate record size in bytes (MessagePack)")
	window := fs.Int("window", 1000, "requests in flight per connection")
	tag := fs.String("tag", "bench.message", "event tag (nagare: the topic)")
	timeout := fs.Duration("timeout", 300*time.Second, "abort after this long")
	_ = fs.Parse(args)
	if *c < 1 || *n < *c || *window < 1 {
		return fmt.Errorf("need c >= 1, n >= c, window >= 1")
	}
	conns := make([]net.Conn, *c)
	for i := range conns {
		cn, err := net.DialTimeout("tcp", *addr, 5*time.Second)
		if err != nil {
			return err
		}
		defer cn.Close()
		conns[i] = cn
	}
	var acked, bytesSent atomic.Int64
	lats := make([]Latencies, *c)
	start := time.Now()
	err := withTimeout(*timeout, "forward run", func() error {
		var wg sync.WaitGroup
		errs := make(chan error, *c)
		for i, cn := range conns {
			count := *n / *c
			if i < *n%*c {
				count++
			}
			wg.Add(1)
			go func(i int, cn net.Conn, count int) {
				defer wg.Done()
				l, err := forwardConn(cn, i, count, *window, *size, *tag, &acked, &bytesSent)
				lats[i] = l
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
				}
			}(i, cn, count)
		}
		wg.Wait()
		close(errs)
		return <-errs
	})
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	var all Latencies
	for _, l := range lats {
		all = append(all, l...)
	}
	r := Result{Title: fmt.Sprintf("forward Message mode with ack c=%d window=%d", *c, *window),
		Target: *target, Items: acked.Load(), Bytes: bytesSent.Load(), Elapsed: elapsed, Lat: all}
	r.Print()
	return nil
}

// chunkIDLen: fixed-length ids make every ack the same length.
const chunkIDLen = 16

func forwardConn(cn net.Conn, conn, count, window, size int, tag string, acked, sent *atomic.Int64) (Latencies, error) {
	filler := bytes.Repeat([]byte{'x'}, max(size-40, 1))
	w := bufio.NewWriterSize(cn, 64<<10)
	// Send times by sequence number, and how many acks came back. The sender waits on
	// `credit` only when its window is full; the reader signals it every `quantum` acks,
	// not on every one: a channel hand-off per event cost the client a goroutine switch
	// per event, more CPU than the rest of the client together.
	start := time.Now()
	sentAt := make([]atomic.Int64, count)
	var progress atomic.Int64
	credit := make(chan struct{}, 1)
	quantum := max(window/8, 1)
	lat := make(Latencies, 0, count)
	readErr := make(chan error, 1)
	go func() {
		r := bufio.NewReaderSize(cn, 64<<10)
		ack := make([]byte, 6+chunkIDLen)
		var wantID [chunkIDLen]byte
		for i := 0; i < count; i++ {
			if _, err := io.ReadFull(r, ack); err != nil {
				readErr <- fmt.Errorf("waiting for ack %d: %w", i, err)
				return
			}
			want := chunkID(&wantID, conn, i)
			if !bytes.Equal(ack[:5], []byte{0x81, 0xa3, 'a', 'c', 'k'}) || !bytes.Equal(ack[6:], want) {
				readErr <- fmt.Errorf("unexpected ack %q for %q", ack, want)
				return
			}
			lat = append(lat, time.Since(start)-time.Duration(sentAt[i].Load()))
			progress.Store(int64(i + 1))
			if (i+1)%quantum == 0 || i == count-1 {
				select {
				case credit <- struct{}{}:
				default:
				}
			}
		}
		acked.Add(int64(count))
		readErr <- nil
	}()
	var buf []byte
	var id [chunkIDLen]byte
	var bytesSent int64
	defer func() { sent.Add(bytesSent) }()
	for i := 0; i < count; i++ {
		for int64(i)-progress.Load() >= int64(window) {
			if err := w.Flush(); err != nil {
				return lat, err
			}
			select {
			case <-credit:
			case err := <-readErr:
				if err == nil {
					err = fmt.Errorf("acks ended early")
				}
				return lat, err
			}
		}
		now := time.Now()
		sentAt[i].Store(int64(now.Sub(start)))
		buf = appendMessage(buf[:0], tag, now, filler, i, chunkID(&id, conn, i))
		if _, err := w.Write(buf); err != nil {
			return lat, err
		}
		bytesSent += int64(len(buf))
		if w.Buffered() > 32<<10 || i == count-1 {
			if err := w.Flush(); err != nil {
				return lat, err
			}
		}
	}
	err := <-readErr
	return lat, err
}

// chunkID is "%04x%012x" of (conn, seq), written into id without formatting or allocating:
// this runs twice per event and must not be what limits the run.
func chunkID(id *[chunkIDLen]byte, conn, seq int) []byte {
	const hex = "0123456789abcdef"
	v := uint64(conn&0xffff)<<48 | uint64(seq)&(1<<48-1)
	for i := chunkIDLen - 1; i >= 0; i-- {
		id[i] = hex[v&15]
		v >>= 4
	}
	return id[:]
}

// appendMessage encodes [tag, EventTime(now), {"seq": i, "host": ..., "msg": filler}, {"chunk": id}].
func appendMessage(b []byte, tag string, now time.Time, filler []byte, seq int, id []byte) []byte {
	b = append(b, 0x94)
	b = appendStr(b, tag)
	b = append(b, 0xd7, 0x00)
	b = binary.BigEndian.AppendUint32(b, uint32(now.Unix()))
	b = binary.BigEndian.AppendUint32(b, uint32(now.Nanosecond()))
	b = append(b, 0x83)
	b = appendStr(b, "seq")
	b = append(b, 0xce)
	b = binary.BigEndian.AppendUint32(b, uint32(seq))
	b = appendStr(b, "host")
	b = appendStr(b, "bench-host-01")
	b = appendStr(b, "msg")
	b = appendStr(b, filler)
	b = append(b, 0x81)
	b = appendStr(b, "chunk")
	b = appendStr(b, id)
	return b
}

func appendStr[S string | []byte](b []byte, s S) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n < 256:
		b = append(b, 0xd9, byte(n))
	default:
		b = append(b, 0xda)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	}
	return append(b, s...)
}
