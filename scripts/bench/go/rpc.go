package main

// Request/reply over MQ, one shape for both transports: a responder answers each request
// (a decimal number) with the number plus one, sent to the request's reply address; C
// client connections each have their own reply address and split N requests. Every reply
// is checked: right value, each exactly once.
//
//	pipelined: each client sends all its requests without waiting and reads replies as
//	           they come (throughput)
//	lockstep:  one request in flight per client (round-trip latency)
//
// NATS: nats.go, requests published with a reply subject INBOX.<n> under a wildcard
// subscription INBOX.* (what nats.go's own Request does). STOMP: SEND to a queue with
// reply-to:/temp-queue/NAME and correlation-id:<n> (RabbitMQ-style temp-queue RPC).

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

type rpcOpts struct {
	proto, addr, flavor, target, mode string
	c, n, window                      int
	timeout                           time.Duration
}

func rpcMain(args []string) error {
	fs := newFlags("rpc")
	var o rpcOpts
	fs.StringVar(&o.proto, "proto", "stomp", "nats or stomp")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:61613", "broker address")
	fs.StringVar(&o.flavor, "flavor", "nagare", "STOMP broker habits: nagare, rabbitmq, activemq")
	fs.StringVar(&o.target, "target", "", "name of the target in the summary (default: flavor, or nats)")
	fs.StringVar(&o.mode, "mode", "pipelined", "pipelined or lockstep")
	fs.IntVar(&o.c, "c", 1, "client connections")
	fs.IntVar(&o.n, "n", 32768, "requests in total, split over the clients")
	fs.IntVar(&o.window, "window", 0, "pipelined: requests in flight per client (0: no limit)")
	fs.DurationVar(&o.timeout, "timeout", 300*time.Second, "abort after this long")
	_ = fs.Parse(args)
	if o.c < 1 || o.n < o.c {
		return fmt.Errorf("need c >= 1 and n >= c")
	}
	if o.mode != "pipelined" && o.mode != "lockstep" {
		return fmt.Errorf("mode must be pipelined or lockstep")
	}
	var tr rpcTransport
	var err error
	switch o.proto {
	case "nats":
		tr, err = newNatsRPC(o.addr)
		if o.target == "" {
			o.target = "nats"
		}
	case "stomp":
		var fl Flavor
		fl, err = flavorByName(o.flavor)
		if err == nil {
			tr, err = newStompRPC(o.addr, fl)
		}
		o.target = targetName(o.flavor, o.target)
	default:
		err = fmt.Errorf("proto must be nats or stomp")
	}
	if err != nil {
		return err
	}
	defer tr.close()
	clients := make([]rpcClient, o.c)
	for i := range clients {
		if clients[i], err = tr.client(i); err != nil {
			return err
		}
	}
	lats := make([]Latencies, o.c)
	start := time.Now()
	err = withTimeout(o.timeout, "rpc run", func() error {
		var wg sync.WaitGroup
		errs := make(chan error, o.c)
		first := 0
		for i, cl := range clients {
			count := o.n / o.c
			if i < o.n%o.c {
				count++
			}
			wg.Add(1)
			go func(i int, cl rpcClient, first, count int) {
				defer wg.Done()
				var err error
				if o.mode == "pipelined" {
					err = cl.pipelined(first, count, newWindow(o.window))
				} else {
					lats[i], err = cl.lockstep(first, count)
				}
				if err != nil {
					errs <- fmt.Errorf("client %d: %w", i, err)
				}
			}(i, cl, first, count)
			first += count
		}
		wg.Wait()
		close(errs)
		return <-errs
	})
	elapsed := time.Since(start)
	if err != nil {
		return fmt.Errorf("%w (%s)", err, progressReport())
	}
	var all Latencies
	for _, l := range lats {
		all = append(all, l...)
	}
	r := Result{Title: fmt.Sprintf("rpc %s n=%d c=%d", o.mode, o.n, o.c), Target: o.target,
		Items: int64(o.n), Elapsed: elapsed, Lat: all}
	r.Print()
	return nil
}

type rpcTransport interface {
	client(i int) (rpcClient, error)
	close()
}

type rpcClient interface {
	pipelined(first, count int, w window) error
	lockstep(first, count int) (Latencies, error)
}

// seen checks each reply: value = correlation + 1, each correlation exactly once.
type seen struct {
	first int
	got   []bool
	n     atomic.Int64 // replies so far, for the report of a run that timed out
}

// window bounds the requests in flight of a pipelined client (nil: no bound). A bound
// keeps a broker's producer flow control from stalling a connection that both sends
// requests and receives replies (seen with ActiveMQ and unbounded pipelining).
type window chan struct{}

func newWindow(n int) window {
	if n <= 0 {
		return nil
	}
	return make(window, n)
}

// take waits for room for one more request; flush runs first when it would wait, so the
// requests already buffered reach the broker.
func (w window) take(flush func() error) error {
	if w == nil {
		return nil
	}
	select {
	case w <- struct{}{}:
		return nil
	default:
	}
	if err := flush(); err != nil {
		return err
	}
	w <- struct{}{}
	return nil
}

// done gives back the room of an answered request.
func (w window) done() {
	if w != nil {
		<-w
	}
}

// What a stuck run had done: replies per client and requests the responder answered.
var (
	progressMu sync.Mutex
	progress   []*seen
	served     atomic.Int64
)

func newSeen(first, count int) *seen {
	s := &seen{first: first, got: make([]bool, count)}
	progressMu.Lock()
	progress = append(progress, s)
	progressMu.Unlock()
	return s
}

func progressReport() string {
	progressMu.Lock()
	defer progressMu.Unlock()
	var b strings.Builder
	b.WriteString("replies per client:")
	for _, s := range progress {
		fmt.Fprintf(&b, " %d/%d", s.n.Load(), len(s.got))
	}
	fmt.Fprintf(&b, "; requests the responder answered: %d", served.Load())
	return b.String()
}

func (s *seen) check(corr, value string) error {
	c, err1 := strconv.Atoi(corr)
	v, err2 := strconv.Atoi(value)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("reply %q to request %q is not a number", value, corr)
	}
	if v != c+1 {
		return fmt.Errorf("reply %d to request %d", v, c)
	}
	i := c - s.first
	if i < 0 || i >= len(s.got) {
		return fmt.Errorf("reply to request %d this client did not send", c)
	}
	if s.got[i] {
		return fmt.Errorf("reply to request %d arrived twice", c)
	}
	s.got[i] = true
	s.n.Add(1)
	return nil
}

// ---- NATS ----

type natsRPC struct {
	addr, subject string
	responder     *nats.Conn
	conns         []*nats.Conn
}

func newNatsRPC(addr string) (*natsRPC, error) {
	t := &natsRPC{addr: addr, subject: "rpc." + runTag()}
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		return nil, err
	}
	t.responder = nc
	_, err = nc.Subscribe(t.subject, func(m *nats.Msg) {
		n, _ := strconv.Atoi(string(m.Data))
		_ = nc.Publish(m.Reply, []byte(strconv.Itoa(n+1)))
		served.Add(1)
	})
	if err == nil {
		// The subscription is known to the server once a round trip is done.
		err = nc.Flush()
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	return t, nil
}

func (t *natsRPC) close() {
	for _, c := range t.conns {
		c.Close()
	}
	t.responder.Close()
}

type natsClient struct {
	nc      *nats.Conn
	sub     *nats.Subscription
	subject string
	inbox   string
}

func (t *natsRPC) client(i int) (rpcClient, error) {
	nc, err := nats.Connect("nats://" + t.addr)
	if err != nil {
		return nil, err
	}
	t.conns = append(t.conns, nc)
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox + ".*")
	if err == nil {
		err = sub.SetPendingLimits(-1, -1)
	}
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		return nil, err
	}
	return &natsClient{nc: nc, sub: sub, subject: t.subject, inbox: inbox + "."}, nil
}

func (c *natsClient) receive(s *seen) error {
	m, err := c.sub.NextMsg(30 * time.Second)
	if err != nil {
		return err
	}
	return s.check(m.Subject[len(c.inbox):], string(m.Data))
}

func (c *natsClient) pipelined(first, count int, w window) error {
	s := newSeen(first, count)
	sendErr := make(chan error, 1)
	go func() {
		for i := first; i < first+count; i++ {
			n := strconv.Itoa(i)
			// nats.go's own flusher writes what is buffered; nothing to flush here.
			if err := w.take(func() error { return nil }); err != nil {
				sendErr <- err
				return
			}
			if err := c.nc.PublishRequest(c.subject, c.inbox+n, []byte(n)); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- c.nc.Flush()
	}()
	for i := 0; i < count; i++ {
		if err := c.receive(s); err != nil {
			return err
		}
		w.done()
	}
	return <-sendErr
}

func (c *natsClient) lockstep(first, count int) (Latencies, error) {
	s := newSeen(first, count)
	lat := make(Latencies, 0, count)
	for i := first; i < first+count; i++ {
		n := strconv.Itoa(i)
		t0 := time.Now()
		if err := c.nc.PublishRequest(c.subject, c.inbox+n, []byte(n)); err != nil {
			return nil, err
		}
		if err := c.receive(s); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}

// ---- STOMP ----

type stompRPC struct {
	addr, queue string
	fl          Flavor
	responder   *StompConn
	conns       []*StompConn
}

func newStompRPC(addr string, fl Flavor) (*stompRPC, error) {
	t := &stompRPC{addr: addr, fl: fl, queue: "/queue/rpc-" + runTag()}
	s, err := dialStomp(addr, fl)
	if err != nil {
		return nil, err
	}
	t.responder = s
	if err := s.SubscribeReceipted("rpc", t.queue, "ack", "auto", "prefetch-count", "1000",
		"activemq.prefetchSize", "1000"); err != nil {
		s.Close()
		return nil, err
	}
	go stompResponder(s)
	return t, nil
}

// stompResponder replies to every request. Replies go out through their own goroutine so
// that reading never waits on writing: a broker that stops reading while its own writes
// are pending (ActiveMQ's NIO transport) would otherwise deadlock with us.
func stompResponder(s *StompConn) {
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	var pending []byte
	closed := false
	go func() {
		var buf []byte
		for {
			mu.Lock()
			for len(pending) == 0 && !closed {
				cond.Wait()
			}
			if closed {
				mu.Unlock()
				return
			}
			buf, pending = pending, buf[:0]
			mu.Unlock()
			if _, err := s.conn.Write(buf); err != nil {
				return
			}
		}
	}()
	var out []byte
	for {
		f, err := s.Read()
		if err != nil {
			mu.Lock()
			closed = true
			cond.Signal()
			mu.Unlock()
			return
		}
		if f.Command != "MESSAGE" {
			continue // ActiveMQ may refuse a reply to a temp queue already gone: go on
		}
		replyTo, ok1 := f.Header("reply-to")
		corr, ok2 := f.Header("correlation-id")
		if !ok1 || !ok2 {
			continue
		}
		n, _ := strconv.Atoi(string(f.Body))
		body := strconv.Itoa(n + 1)
		out = append(out, "SEND\ndestination:"...)
		out = append(out, replyTo...)
		out = append(out, "\ncorrelation-id:"...)
		out = append(out, corr...)
		out = append(out, "\ncontent-length:"...)
		out = strconv.AppendInt(out, int64(len(body)), 10)
		out = append(out, "\n\n"...)
		out = append(out, body...)
		out = append(out, 0)
		served.Add(1)
		// One write per batch of requests that arrived together.
		if s.R.Buffered() == 0 {
			mu.Lock()
			pending = append(pending, out...)
			cond.Signal()
			mu.Unlock()
			out = out[:0]
		}
	}
}

func (t *stompRPC) close() {
	for _, c := range t.conns {
		c.Close()
	}
	t.responder.Close()
}

type stompClient struct {
	s           *StompConn
	queue, temp string
}

func (t *stompRPC) client(i int) (rpcClient, error) {
	s, err := dialStomp(t.addr, t.fl)
	if err != nil {
		return nil, err
	}
	t.conns = append(t.conns, s)
	temp := fmt.Sprintf("/temp-queue/rpc-%d", i)
	if t.fl.TempSubscribe {
		if err := s.SubscribeReceipted("replies", temp); err != nil {
			return nil, err
		}
	}
	return &stompClient{s: s, queue: t.queue, temp: temp}, nil
}

func (c *stompClient) receive(sn *seen) error {
	for {
		f, err := c.s.Read()
		if err != nil {
			return err
		}
		switch f.Command {
		case "ERROR":
			return f.errorText()
		case "MESSAGE":
			corr, _ := f.Header("correlation-id")
			return sn.check(corr, string(f.Body))
		}
	}
}

func (c *stompClient) pipelined(first, count int, w window) error {
	sn := newSeen(first, count)
	sendErr := make(chan error, 1)
	go func() {
		c.s.Mu.Lock()
		defer c.s.Mu.Unlock()
		for i := first; i < first+count; i++ {
			n := strconv.Itoa(i)
			if err := w.take(c.s.W.Flush); err != nil {
				sendErr <- err
				return
			}
			if err := c.s.WriteFrame("SEND", []byte(n), "destination", c.queue, "reply-to", c.temp, "correlation-id", n); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- c.s.W.Flush()
	}()
	for i := 0; i < count; i++ {
		if err := c.receive(sn); err != nil {
			return err
		}
		w.done()
	}
	return <-sendErr
}

func (c *stompClient) lockstep(first, count int) (Latencies, error) {
	sn := newSeen(first, count)
	lat := make(Latencies, 0, count)
	for i := first; i < first+count; i++ {
		n := strconv.Itoa(i)
		t0 := time.Now()
		if err := c.s.Send("SEND", []byte(n), "destination", c.queue, "reply-to", c.temp, "correlation-id", n); err != nil {
			return nil, err
		}
		if err := c.receive(sn); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}
