package main

// Kafka transactional produce with franz-go: the same loop as Kafka's ProducerPerformance
// with --transaction-duration-ms (begin, produce for D ms, flush, commit), from a client
// that spends about a microsecond of CPU per record, so that on a small machine the broker
// rather than the client sets the pace. Latency is send -> acknowledgement of each record.

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func txnMain(args []string) error {
	fs := newFlags("txn")
	addr := fs.String("addr", "127.0.0.1:9092", "Kafka bootstrap address")
	target := fs.String("target", "", "name of the broker in the summary")
	topicFlag := fs.String("topic", "", "topic to write (default: a new one per run; auto-created)")
	n := fs.Int("n", 1000000, "records")
	size := fs.Int("size", 100, "value bytes")
	duration := fs.Duration("txn-duration", 100*time.Millisecond, "commit a transaction after this long")
	linger := fs.Duration("linger", 5*time.Millisecond, "producer linger")
	batch := fs.Int("batch-bytes", 65536, "producer batch size")
	timeout := fs.Duration("timeout", 300*time.Second, "abort after this long")
	_ = fs.Parse(args)
	if *n < 1 || *size < 0 {
		return fmt.Errorf("n must be at least 1 and size not negative")
	}
	topic := *topicFlag
	if topic == "" {
		topic = "bench-txn-" + runTag()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(*addr),
		kgo.TransactionalID("bench-txn-"+runTag()),
		kgo.DefaultProduceTopic(topic),
		kgo.AllowAutoTopicCreation(),
		kgo.ProducerLinger(*linger),
		kgo.ProducerBatchMaxBytes(int32(*batch)),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	value := bytes.Repeat([]byte{'t'}, *size)
	lat := make(Latencies, 0, *n)
	var commits int
	start := time.Now()
	err = withTimeout(*timeout, "txn run", func() error {
		var err error
		commits, err = txnProduce(cl, value, *n, *duration, &lat)
		return err
	})
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	r := Result{Title: fmt.Sprintf("kafka txn produce n=%d size=%d txn=%s", *n, *size, *duration),
		Target: targetName("kafka", *target), Items: int64(*n), Bytes: int64(*n) * int64(*size),
		Elapsed: elapsed, Lat: lat, Extra: map[string]string{"commits": fmt.Sprint(commits)}}
	r.Print()
	return nil
}

// txnProduce runs transactions of `duration` until n records are committed and returns
// how many it committed.
func txnProduce(cl *kgo.Client, value []byte, n int, duration time.Duration, lat *Latencies) (int, error) {
	ctx := context.Background()
	var mu sync.Mutex
	var firstErr error
	done := func(sent time.Time) func(*kgo.Record, error) {
		return func(_ *kgo.Record, err error) {
			d := time.Since(sent)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			*lat = append(*lat, d)
		}
	}
	commits := 0
	for produced := 0; produced < n; {
		if err := cl.BeginTransaction(); err != nil {
			return commits, fmt.Errorf("begin: %w", err)
		}
		began := time.Now()
		for produced < n && time.Since(began) < duration {
			cl.Produce(ctx, &kgo.Record{Value: value}, done(time.Now()))
			produced++
		}
		if err := cl.Flush(ctx); err != nil {
			return commits, fmt.Errorf("flush: %w", err)
		}
		mu.Lock()
		err := firstErr
		mu.Unlock()
		if err != nil {
			return commits, fmt.Errorf("produce: %w", err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return commits, fmt.Errorf("commit: %w", err)
		}
		commits++
	}
	return commits, nil
}

// txnConsumeMain reads a topic from its start with isolation.level=read_committed until it
// has n records (franz-go; commit markers are skipped by the client, aborted data filtered).
func txnConsumeMain(args []string) error {
	fs := newFlags("txn-consume")
	addr := fs.String("addr", "127.0.0.1:9092", "Kafka bootstrap address")
	target := fs.String("target", "", "name of the broker in the summary")
	topic := fs.String("topic", "", "topic to read (required)")
	n := fs.Int("n", 1000000, "records to read")
	timeout := fs.Duration("timeout", 300*time.Second, "abort after this long")
	_ = fs.Parse(args)
	if *topic == "" || *n < 1 {
		return fmt.Errorf("-topic is required and -n must be at least 1")
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(*addr),
		kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	var got, bytesRead int64
	start := time.Now()
	err = withTimeout(*timeout, "txn-consume run", func() error {
		ctx := context.Background()
		for got < int64(*n) {
			fetches := cl.PollFetches(ctx)
			if errs := fetches.Errors(); len(errs) > 0 {
				return fmt.Errorf("fetch: %v", errs[0].Err)
			}
			fetches.EachRecord(func(r *kgo.Record) {
				got++
				bytesRead += int64(len(r.Value))
			})
		}
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	r := Result{Title: fmt.Sprintf("kafka read_committed consume n=%d", *n), Target: targetName("kafka", *target),
		Items: got, Bytes: bytesRead, Elapsed: elapsed}
	r.Print()
	return nil
}
