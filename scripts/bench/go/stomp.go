package main

// A raw STOMP 1.2 client: just what the benchmarks need, with no library between the
// workload and the wire, so the same bytes go to nagare, RabbitMQ and ActiveMQ.

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// Flavor holds the per-broker habits the client must follow.
type Flavor struct {
	Name  string
	Login string
	Pass  string
	// Vhost is the CONNECT host header; RabbitMQ reads it as the virtual host.
	Vhost string
	// TempSubscribe: the requester SUBSCRIBEs to its own temp queue (ActiveMQ needs it;
	// RabbitMQ delivers without; nagare accepts either).
	TempSubscribe bool
}

func flavorByName(name string) (Flavor, error) {
	switch name {
	case "nagare":
		return Flavor{Name: name, Vhost: "127.0.0.1"}, nil
	case "rabbitmq":
		return Flavor{Name: name, Login: "guest", Pass: "guest", Vhost: "/"}, nil
	case "activemq":
		return Flavor{Name: name, Vhost: "127.0.0.1", TempSubscribe: true}, nil
	}
	return Flavor{}, fmt.Errorf("unknown STOMP flavor %q (nagare, rabbitmq, activemq)", name)
}

// Frame is one STOMP frame. Header values are kept as they came (still escaped), so a
// reply-to copied into a SEND's destination goes back byte for byte.
type Frame struct {
	Command string
	Headers []string // key, value, key, value...
	Body    []byte
}

// Header returns the first value of a header (STOMP 1.2: the first one wins).
func (f *Frame) Header(k string) (string, bool) {
	for i := 0; i+1 < len(f.Headers); i += 2 {
		if f.Headers[i] == k {
			return f.Headers[i+1], true
		}
	}
	return "", false
}

func (f *Frame) errorText() error {
	msg, _ := f.Header("message")
	return fmt.Errorf("ERROR frame from broker: %s %s", msg, bytes.TrimSpace(f.Body))
}

// maxFrameBytes bounds what one frame may make the client buffer.
const maxFrameBytes = 16 << 20

// StompConn is a connected session. Reads belong to one goroutine; writes go through W
// under Mu when several goroutines write.
type StompConn struct {
	conn net.Conn
	R    *bufio.Reader
	Mu   sync.Mutex
	W    *bufio.Writer
	// What Read reuses from frame to frame, so that reading a frame costs one allocation
	// (its header text) rather than two per header: a client that allocates per header
	// spends more CPU in the allocator and the GC than in the protocol, and on a small
	// machine that CPU is taken from the broker under test.
	frame Frame
	block []byte // command and header lines of the frame being read, without EOLs
	spans []int  // per header: where its line starts, its colon and its end in block
	body  []byte
}

func dialStomp(addr string, fl Flavor) (*StompConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	s := &StompConn{conn: c, R: bufio.NewReaderSize(c, 256<<10), W: bufio.NewWriterSize(c, 64<<10)}
	var b bytes.Buffer
	b.WriteString("CONNECT\naccept-version:1.2\nheart-beat:0,0\nhost:" + fl.Vhost + "\n")
	if fl.Login != "" {
		b.WriteString("login:" + fl.Login + "\npasscode:" + fl.Pass + "\n")
	}
	b.WriteString("\n\x00")
	if _, err := c.Write(b.Bytes()); err != nil {
		c.Close()
		return nil, err
	}
	f, err := s.Read()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("CONNECT to %s: %w", addr, err)
	}
	if f.Command != "CONNECTED" {
		c.Close()
		return nil, fmt.Errorf("CONNECT to %s refused: %v", addr, f.errorText())
	}
	if v, _ := f.Header("version"); v != "1.2" {
		c.Close()
		return nil, fmt.Errorf("%s negotiated STOMP %q, the benchmark speaks 1.2", addr, v)
	}
	return s, nil
}

func (s *StompConn) Close() { _ = s.conn.Close() }

// trimEOL drops a line's EOL: LF, or CR LF.
func trimEOL(line []byte) []byte {
	n := len(line)
	if n > 0 && line[n-1] == '\n' {
		n--
	}
	if n > 0 && line[n-1] == '\r' {
		n--
	}
	return line[:n]
}

// Read returns the next frame; heart-beat EOLs are skipped. ERROR frames are returned as
// frames (the caller decides). The frame and its Body are reused by the next Read; its
// Command and header strings stay valid.
func (s *StompConn) Read() (*Frame, error) {
	var line []byte
	var err error
	for {
		line, err = s.R.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		line = trimEOL(line)
		if len(line) > 0 {
			break
		}
	}
	s.block = append(s.block[:0], line...)
	commandEnd := len(s.block)
	s.spans = s.spans[:0]
	clen := -1
	for {
		line, err = s.R.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		line = trimEOL(line)
		if len(line) == 0 {
			break
		}
		i := bytes.IndexByte(line, ':')
		if i < 0 {
			return nil, fmt.Errorf("malformed header line %q", line)
		}
		if clen < 0 && string(line[:i]) == "content-length" {
			n, err := strconv.Atoi(string(line[i+1:]))
			if err != nil || n < 0 || n > maxFrameBytes {
				return nil, fmt.Errorf("bad content-length %q", line[i+1:])
			}
			clen = n
		}
		if len(s.spans) >= 3*128 {
			return nil, fmt.Errorf("more than 128 headers in a %s frame", s.block[:commandEnd])
		}
		start := len(s.block)
		s.block = append(s.block, line...)
		s.spans = append(s.spans, start, start+i, len(s.block))
	}
	// One allocation per frame: every header string is a piece of this one.
	text := string(s.block)
	f := &s.frame
	f.Command = text[:commandEnd]
	f.Headers = f.Headers[:0]
	for j := 0; j+2 < len(s.spans); j += 3 {
		f.Headers = append(f.Headers, text[s.spans[j]:s.spans[j+1]], text[s.spans[j+1]+1:s.spans[j+2]])
	}
	if clen >= 0 {
		if cap(s.body) < clen+1 {
			s.body = make([]byte, clen+1)
		}
		b := s.body[:clen+1]
		if _, err := readFull(s.R, b); err != nil {
			return nil, err
		}
		if b[clen] != 0 {
			return nil, fmt.Errorf("frame body not followed by NUL")
		}
		f.Body = b[:clen]
	} else {
		s.body = s.body[:0]
		for {
			chunk, err := s.R.ReadSlice(0)
			s.body = append(s.body, chunk...)
			if len(s.body) > maxFrameBytes+1 {
				return nil, fmt.Errorf("frame body over %d bytes", maxFrameBytes)
			}
			if err == nil {
				break
			}
			if err != bufio.ErrBufferFull {
				return nil, err
			}
		}
		f.Body = s.body[:len(s.body)-1]
	}
	// Brokers may follow the NUL with EOLs (RabbitMQ sends one): eat the buffered ones now,
	// so that Buffered() == 0 really means "no frame waiting".
	for s.R.Buffered() > 0 {
		b, _ := s.R.Peek(1)
		if b[0] != '\n' && b[0] != '\r' {
			break
		}
		_, _ = s.R.ReadByte()
	}
	return f, nil
}

// Expect reads frames until one with the given command; an ERROR fails.
func (s *StompConn) Expect(cmd string) (*Frame, error) {
	for {
		f, err := s.Read()
		if err != nil {
			return nil, err
		}
		if f.Command == "ERROR" {
			return nil, f.errorText()
		}
		if f.Command == cmd {
			return f, nil
		}
	}
}

func readFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// WriteFrame appends one frame to the write buffer (header values must already be escaped;
// ours never need escaping). The caller flushes.
func (s *StompConn) WriteFrame(cmd string, body []byte, headers ...string) error {
	w := s.W
	w.WriteString(cmd)
	w.WriteByte('\n')
	for i := 0; i+1 < len(headers); i += 2 {
		w.WriteString(headers[i])
		w.WriteByte(':')
		w.WriteString(headers[i+1])
		w.WriteByte('\n')
	}
	if body != nil {
		w.WriteString("content-length:")
		w.WriteString(strconv.Itoa(len(body)))
		w.WriteByte('\n')
	}
	w.WriteByte('\n')
	w.Write(body)
	return w.WriteByte(0)
}

// Send writes one frame and flushes, under the write lock.
func (s *StompConn) Send(cmd string, body []byte, headers ...string) error {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if err := s.WriteFrame(cmd, body, headers...); err != nil {
		return err
	}
	return s.W.Flush()
}

// SubscribeReceipted SUBSCRIBEs and waits for the broker's RECEIPT, so that what is sent
// afterwards is seen by the subscription.
func (s *StompConn) SubscribeReceipted(id, dest string, extra ...string) error {
	h := append([]string{"id", id, "destination", dest, "receipt", "sub-" + id}, extra...)
	if err := s.Send("SUBSCRIBE", nil, h...); err != nil {
		return err
	}
	_, err := s.Expect("RECEIPT")
	return err
}

// Disconnect asks for a receipt so that everything sent before is processed, then closes.
func (s *StompConn) Disconnect() {
	if s.Send("DISCONNECT", nil, "receipt", "bye") == nil {
		_ = s.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = s.Expect("RECEIPT")
	}
	s.Close()
}
