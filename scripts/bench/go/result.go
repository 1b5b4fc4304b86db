package main

import (
	"fmt"
	"sort"
	"time"
)

// Latencies collects round-trip times; percentiles are read after the run (sorting a few
// hundred thousand values is cheaper than any histogram on the hot path).
type Latencies []time.Duration

func (l Latencies) quantileMicros(q float64) int64 {
	if len(l) == 0 {
		return 0
	}
	i := int(q * float64(len(l)-1))
	return l[i].Microseconds()
}

// Result is one finished run. Print writes a human summary and one `RESULT` line in the
// same format as `nagare bench`, which scripts/bench-peers parses.
type Result struct {
	Title   string
	Target  string
	Items   int64
	Bytes   int64
	Elapsed time.Duration
	Lat     Latencies
	Extra   map[string]string
}

func (r *Result) Print() {
	secs := r.Elapsed.Seconds()
	if secs <= 0 {
		secs = 1e-9
	}
	sort.Slice(r.Lat, func(i, j int) bool { return r.Lat[i] < r.Lat[j] })
	p50, p99, p999 := r.Lat.quantileMicros(0.5), r.Lat.quantileMicros(0.99), r.Lat.quantileMicros(0.999)
	fmt.Printf("\n%s against %s\n", r.Title, r.Target)
	fmt.Printf("  %-14s %16d\n", "items", r.Items)
	fmt.Printf("  %-14s %16.3f s\n", "elapsed", secs)
	fmt.Printf("  %-14s %16.0f /s\n", "throughput", float64(r.Items)/secs)
	if r.Bytes > 0 {
		fmt.Printf("  %-14s %16.2f MB/s\n", "bandwidth", float64(r.Bytes)/1e6/secs)
	}
	if len(r.Lat) > 0 {
		fmt.Printf("  %-14s %16d µs\n  %-14s %16d µs\n  %-14s %16d µs\n", "latency p50", p50, "latency p99", p99, "latency p99.9", p999)
	}
	extra := ""
	for _, k := range sortedKeys(r.Extra) {
		extra += fmt.Sprintf(" %s=%s", k, r.Extra[k])
	}
	fmt.Printf("RESULT title=%q target=%q items=%d secs=%.3f per_sec=%.0f mb_per_sec=%.2f p50_us=%d p99_us=%d p999_us=%d%s\n",
		r.Title, r.Target, r.Items, secs, float64(r.Items)/secs, float64(r.Bytes)/1e6/secs, p50, p99, p999, extra)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
