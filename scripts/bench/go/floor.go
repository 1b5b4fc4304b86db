package main

// floor: the round trip this machine allows at all, with no broker. A requester sends a
// fixed-size request and waits for the answer (lock-step, one in flight), through a
// relay that only copies bytes between two loopback TCP connections, to a responder that
// echoes. That is the path of an RPC over a broker (requester -> broker -> responder ->
// broker -> requester: four socket hand-offs, each a wake-up) minus everything a broker
// does, so no broker's lock-step p50 can be below it here. `-direct` measures one hop
// each way instead (requester <-> responder). With `-procs` the relay and the responder
// are processes of their own, as a broker and a responder are: a wake-up then crosses
// processes (and, on a virtual machine, often wakes an idle virtual CPU), while inside
// one Go process the runtime's spinning threads hide part of that cost.

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

func floorMain(args []string) error {
	fs := flag.NewFlagSet("floor", flag.ExitOnError)
	n := fs.Int("n", 20000, "round trips")
	size := fs.Int("size", 100, "request and answer bytes")
	direct := fs.Bool("direct", false, "no relay: requester <-> responder")
	procs := fs.Bool("procs", false, "relay and responder in processes of their own")
	role := fs.String("role", "", "internal: run as the echo or relay process")
	to := fs.String("to", "", "internal: the relay's upstream address")
	fs.Parse(args)
	if *n < 1 || *size < 1 {
		return fmt.Errorf("n and size must be at least 1")
	}
	switch *role {
	case "echo":
		return serveRole(func(c net.Conn) { echoLoop(c, *size) })
	case "relay":
		return serveRole(func(c net.Conn) { relayTo(c, *to) })
	}
	launch := func(serve func(net.Conn), role ...string) (string, error) {
		if *procs {
			return spawnRole(append(role, "-size", fmt.Sprint(*size))...)
		}
		return listenOnce(serve)
	}
	echo, err := launch(func(c net.Conn) { echoLoop(c, *size) }, "-role", "echo")
	if err != nil {
		return err
	}
	target := echo
	if !*direct {
		target, err = launch(func(c net.Conn) { relayTo(c, echo) }, "-role", "relay", "-to", echo)
		if err != nil {
			return err
		}
	}
	conn, err := net.Dial("tcp", target)
	if err != nil {
		return err
	}
	defer conn.Close()
	req, ans := make([]byte, *size), make([]byte, *size)
	lat := make(Latencies, 0, *n)
	start := time.Now()
	for i := 0; i < *n; i++ {
		t := time.Now()
		if _, err := conn.Write(req); err != nil {
			return err
		}
		if _, err := io.ReadFull(conn, ans); err != nil {
			return err
		}
		lat = append(lat, time.Since(t))
	}
	elapsed := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	shape := "requester -> relay -> responder -> relay -> requester"
	if *direct {
		shape = "requester -> responder -> requester"
	}
	if *procs {
		shape += " (separate processes)"
	}
	r := Result{Title: "loopback round-trip floor: " + shape, Target: "no broker", Items: int64(*n),
		Elapsed: elapsed, Lat: lat}
	r.Print()
	return nil
}

// listenOnce listens on a free loopback port and serves the first connection with serve.
func listenOnce(serve func(net.Conn)) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() {
		defer l.Close()
		c, err := l.Accept()
		if err != nil {
			return
		}
		serve(c)
	}()
	return l.Addr().String(), nil
}

// serveRole runs as a child process: prints its address, serves one connection, exits.
func serveRole(serve func(net.Conn)) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(l.Addr().String())
	c, err := l.Accept()
	l.Close()
	if err != nil {
		return err
	}
	serve(c)
	return nil
}

// spawnRole starts this program as a child in the given role and returns the address it
// listens on; the child exits when its connection closes.
func spawnRole(args ...string) (string, error) {
	cmd := exec.Command(os.Args[0], append([]string{"floor"}, args...)...)
	// Not this process's stderr: a child must not hold the caller's pipes open.
	cmd.Stderr = nil
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	go cmd.Wait()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("floor %s: no address: %w", args[1], err)
	}
	return strings.TrimSpace(line), nil
}

func echoLoop(c net.Conn, size int) {
	defer c.Close()
	buf := make([]byte, size)
	for {
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

// relayTo copies bytes both ways between c and a new connection to addr, as a broker
// would forward a request and its reply, doing nothing else.
func relayTo(c net.Conn, addr string) {
	defer c.Close()
	up, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer up.Close()
	go func() {
		io.Copy(up, c)
		// The requester is gone: end the responder's side too, so both exit.
		up.Close()
	}()
	io.Copy(c, up)
}
