// ackedsender: forward-protocol load with acknowledgements through
// github.com/fluent/fluent-logger-golang (RequestAck), printing what was acknowledged so
// that a test can check afterwards that nothing acknowledged was lost.
//
//	ackedsender -addrs HOST:PORT[,HOST:PORT...] -tag TAG -prefix P
//	            [-conns 1] [-duration 0s] [-count 0] [-size 0] [-rate 0] [-quiet] [-stdin]
//
// Each of -conns connections sends events {"id": "P-c-i", "seq": i, "pad": ...} one at a
// time and waits for each ack (the library's synchronous mode). Its own retries are off
// (MaxRetry 1) so that every resend is visible here: after a failure the same event is
// sent again, to the next address of -addrs, after a "retry ID REASON" line. Output:
// "ack ID SENT_MS" per acknowledged event (SENT_MS: when its acknowledged send began, in
// Unix milliseconds; not with -quiet), then
// "done acked=N retries=R elapsed=SECONDS". It stops after -duration, after -count events
// per connection, or (-stdin) when its standard input closes; every wait is bounded.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluent/fluent-logger-golang/fluent"
)

type output struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (o *output) line(format string, args ...interface{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.w, format+"\n", args...)
	// Flushed per line: the test reads acknowledgements while the load runs.
	o.w.Flush()
}

func main() {
	addrs := flag.String("addrs", "", "forward receivers, tried in turn after a failure")
	tag := flag.String("tag", "", "event tag")
	prefix := flag.String("prefix", "ev", "event id prefix")
	conns := flag.Int("conns", 1, "connections sending in parallel")
	duration := flag.Duration("duration", 0, "stop after this long (0: no limit)")
	count := flag.Int("count", 0, "events per connection (0: no limit)")
	size := flag.Int("size", 0, "bytes of padding per event")
	quiet := flag.Bool("quiet", false, "no line per acknowledged event")
	stdin := flag.Bool("stdin", false, "stop when standard input closes")
	timeout := flag.Duration("timeout", 10*time.Second, "connect, write and ack timeout")
	rate := flag.Float64("rate", 0, "events per second per connection at most (0: as fast as acks come)")
	flag.Parse()
	list := strings.Split(*addrs, ",")
	if *addrs == "" || *tag == "" || (*duration == 0 && *count == 0 && !*stdin) {
		fmt.Fprintln(os.Stderr, "usage: ackedsender -addrs H:P[,H:P] -tag TAG -prefix P [-conns N] (-duration D | -count N | -stdin) [-size B] [-quiet]")
		os.Exit(2)
	}

	var stop atomic.Bool
	if *duration > 0 {
		time.AfterFunc(*duration, func() { stop.Store(true) })
	}
	if *stdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			stop.Store(true)
		}()
	}

	out := &output{w: bufio.NewWriterSize(os.Stdout, 1<<16)}
	pad := strings.Repeat("x", *size)
	var acked, retries atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < *conns; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			s := sender{list: list, next: c % len(list), timeout: *timeout}
			defer s.close()
			next := time.Now()
			for i := 0; (*count == 0 || i < *count) && !stop.Load(); i++ {
				if *rate > 0 {
					// No burst to catch up after an outage: the pace restarts from now.
					if time.Until(next) < -time.Second {
						next = time.Now()
					}
					time.Sleep(time.Until(next))
					next = next.Add(time.Duration(float64(time.Second) / *rate))
				}
				id := fmt.Sprintf("%s-%d-%d", *prefix, c, i)
				rec := map[string]interface{}{"id": id, "seq": i, "pad": pad}
				for !stop.Load() {
					sent := time.Now()
					err := s.post(*tag, rec)
					if err == nil {
						acked.Add(1)
						if !*quiet {
							out.line("ack %s %d", id, sent.UnixMilli())
						}
						break
					}
					retries.Add(1)
					out.line("retry %s %s", id, strings.ReplaceAll(err.Error(), "\n", " "))
					time.Sleep(200 * time.Millisecond)
				}
			}
		}(c)
	}
	wg.Wait()
	out.line("done acked=%d retries=%d elapsed=%.3f", acked.Load(), retries.Load(), time.Since(start).Seconds())
}

// sender keeps one connection; after a failure it moves on to the next address.
type sender struct {
	list    []string
	next    int
	timeout time.Duration
	logger  *fluent.Fluent
}

func (s *sender) post(tag string, rec map[string]interface{}) error {
	if s.logger == nil {
		addr := s.list[s.next%len(s.list)]
		s.next++
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return err
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return err
		}
		logger, err := fluent.New(fluent.Config{
			FluentHost:         host,
			FluentPort:         p,
			RequestAck:         true,
			SubSecondPrecision: true,
			Timeout:            s.timeout,
			WriteTimeout:       s.timeout,
			ReadTimeout:        s.timeout,
			MaxRetry:           1,
		})
		if err != nil {
			if logger != nil {
				_ = logger.Close()
			}
			return fmt.Errorf("connect %s: %w", addr, err)
		}
		s.logger = logger
	}
	if err := s.logger.PostWithTime(tag, time.Now(), rec); err != nil {
		s.close()
		return err
	}
	return nil
}

func (s *sender) close() {
	if s.logger != nil {
		_ = s.logger.Close()
		s.logger = nil
	}
}
