//! `nagare bench produce|consume`: a Kafka-protocol load generator (nagare's own small
//! client, so the same program measures nagare and Apache Kafka).
//!
//! Produce: record batches of `--batch-bytes` (like the Java producer's `batch.size`),
//! uncompressed, `--in-flight` requests outstanding per connection, latency per request.
//! Consume: fetches from the start of the partition until `--records` are read.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::Args;
use nagare_kafka::client::{count_records, Connection};
use nagare_log::batch::{build_batch, NewRecord};

use super::report::{latency_histogram, progress, record, Summary};

#[derive(Debug, Args)]
pub(crate) struct ProduceArgs {
    /// Kafka address of the broker (nagare or Apache Kafka).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Topic (created through metadata auto-creation when missing).
    #[arg(short, long, default_value = "nagare-bench")]
    pub topic: String,
    /// Records to send.
    #[arg(short = 'n', long, default_value_t = 2_000_000)]
    pub records: u64,
    /// Value size of each record in bytes.
    #[arg(short = 's', long, default_value_t = 100)]
    pub record_size: usize,
    /// Bytes per record batch (the Java producer's batch.size).
    #[arg(long, default_value_t = 16384)]
    pub batch_bytes: usize,
    /// acks: 0, 1 or -1 (all).
    #[arg(long, default_value_t = 1, allow_hyphen_values = true)]
    pub acks: i16,
    /// Produce requests outstanding per connection.
    #[arg(long, default_value_t = 5)]
    pub in_flight: usize,
    /// Connections, each sending its share of the records to its own partition
    /// (partition = connection index modulo the topic's partitions).
    #[arg(short, long, default_value_t = 1)]
    pub connections: usize,
}

#[derive(Debug, Args)]
pub(crate) struct ConsumeArgs {
    /// Kafka address of the broker (nagare or Apache Kafka).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Topic to read.
    #[arg(short, long, default_value = "nagare-bench")]
    pub topic: String,
    /// Partition to read.
    #[arg(short, long, default_value_t = 0)]
    pub partition: i32,
    /// Records to read (default: everything up to the end at start).
    #[arg(short = 'n', long)]
    pub records: Option<u64>,
    /// Bytes per fetch (the consumer's max.partition.fetch.bytes).
    #[arg(long, default_value_t = 1024 * 1024)]
    pub fetch_bytes: i32,
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Batches of about `batch_bytes` of `record_size`-byte records; a few distinct ones are
/// cycled so building them costs nothing during the run.
fn make_batches(records_per_batch: usize, record_size: usize) -> Vec<Bytes> {
    (0..8u8)
        .map(|i| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            let records: Vec<NewRecord> = (0..records_per_batch)
                .map(|r| NewRecord {
                    key: None,
                    value: Some(Bytes::from(vec![b'a' + (r as u8 + i) % 26; record_size])),
                    headers: Vec::new(),
                    timestamp: now,
                })
                .collect();
            build_batch(&records).freeze()
        })
        .collect()
}

pub(super) fn produce(args: ProduceArgs) -> anyhow::Result<()> {
    if args.record_size == 0 || args.records == 0 || args.connections == 0 {
        bail!("records, record size and connections must be positive");
    }
    let per_batch = (args.batch_bytes / (args.record_size + 8)).max(1);
    let batches = make_batches(per_batch, args.record_size);
    let rt = runtime()?;
    rt.block_on(async move {
        let mut probe = Connection::connect(&args.bootstrap)
            .await
            .with_context(|| format!("connecting to {}", args.bootstrap))?;
        let partitions = probe.ensure_topic(&args.topic).await? as i32;
        let bar = progress(args.records, "produce");
        let t0 = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..args.connections {
            let share = args.records / args.connections as u64
                + u64::from((c as u64) < args.records % args.connections as u64);
            let conn = Connection::connect(&args.bootstrap).await?;
            let batches = batches.clone();
            let topic = args.topic.clone();
            let bar = bar.clone();
            let (acks, in_flight) = (args.acks, args.in_flight.max(1));
            tasks.push(tokio::spawn(async move {
                produce_one(
                    conn,
                    topic,
                    c as i32 % partitions,
                    share,
                    batches,
                    per_batch,
                    acks,
                    in_flight,
                    bar,
                )
                .await
            }));
        }
        let mut hist = latency_histogram();
        for t in tasks {
            hist.add(t.await??)?;
        }
        let elapsed = t0.elapsed();
        bar.finish_and_clear();
        Summary {
            title: &format!(
                "produce {} B records, {} per batch, acks={}, {} connection(s)",
                args.record_size, per_batch, args.acks, args.connections
            ),
            target: &args.bootstrap,
            items: args.records,
            bytes: args.records * args.record_size as u64,
            elapsed,
            latency: (args.acks != 0).then_some(&hist),
        }
        .print();
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)]
async fn produce_one(
    conn: Connection,
    topic: String,
    partition: i32,
    records: u64,
    batches: Vec<Bytes>,
    per_batch: usize,
    acks: i16,
    in_flight: usize,
    bar: indicatif::ProgressBar,
) -> anyhow::Result<hdrhistogram::Histogram<u64>> {
    let (mut writer, mut reader) = conn.split();
    let requests = records.div_ceil(per_batch as u64);
    // The last batch is cut to the exact record count.
    let last_len = (records - (requests - 1) * per_batch as u64) as usize;
    let last = if last_len == per_batch {
        batches[0].clone()
    } else {
        make_batches(last_len, batch_record_size(&batches[0], per_batch)).remove(0)
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(Instant, u64)>(in_flight);
    let read = tokio::spawn(async move {
        let mut hist = latency_histogram();
        if acks == 0 {
            return Ok::<_, anyhow::Error>(hist);
        }
        while let Some((sent, n)) = rx.recv().await {
            let p = reader.recv_produce().await?;
            if p.error_code != 0 {
                bail!("produce failed with error code {}", p.error_code);
            }
            record(&mut hist, sent.elapsed());
            bar.inc(n);
        }
        Ok(hist)
    });
    for i in 0..requests {
        let (batch, n) = if i + 1 == requests {
            (last.clone(), last_len as u64)
        } else {
            (
                batches[i as usize % batches.len()].clone(),
                per_batch as u64,
            )
        };
        if acks != 0 {
            // Blocks while `in_flight` requests are unanswered.
            tx.send((Instant::now(), n)).await?;
        }
        writer.send_produce(&topic, partition, batch, acks).await?;
    }
    drop(tx);
    let hist = read.await??;
    if acks == 0 {
        // Nothing tells us when the broker has it; give it a moment to drain the socket.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(hist)
}

/// The record value size used to build `batch` (for rebuilding a shorter last batch).
fn batch_record_size(batch: &Bytes, per_batch: usize) -> usize {
    nagare_log::batch::decode_records(batch)
        .ok()
        .and_then(|r| r.first().and_then(|r| r.value.as_ref().map(|v| v.len())))
        .unwrap_or(batch.len() / per_batch.max(1))
}

pub(super) fn consume(args: ConsumeArgs) -> anyhow::Result<()> {
    let rt = runtime()?;
    rt.block_on(async move {
        let mut conn = Connection::connect(&args.bootstrap)
            .await
            .with_context(|| format!("connecting to {}", args.bootstrap))?;
        let start = conn.list_offset(&args.topic, args.partition, -2).await?;
        let end = conn.list_offset(&args.topic, args.partition, -1).await?;
        let want = args.records.unwrap_or((end - start).max(0) as u64);
        if want == 0 {
            bail!("topic {} partition {} is empty", args.topic, args.partition);
        }
        let bar = progress(want, "consume");
        let mut hist = latency_histogram();
        let (mut offset, mut got, mut bytes) = (start, 0u64, 0u64);
        let t0 = Instant::now();
        while got < want {
            let t = Instant::now();
            let f = conn
                .fetch(&args.topic, args.partition, offset, args.fetch_bytes, 500)
                .await?;
            if f.error_code != 0 {
                bail!("fetch failed with error code {}", f.error_code);
            }
            record(&mut hist, t.elapsed());
            let (n, next) = count_records(&f.records, offset);
            got += n;
            bytes += f.records.len() as u64;
            offset = next;
            bar.inc(n);
        }
        let elapsed = t0.elapsed();
        bar.finish_and_clear();
        Summary {
            title: &format!("consume, {} B per fetch", args.fetch_bytes),
            target: &args.bootstrap,
            items: got,
            bytes,
            elapsed,
            latency: Some(&hist),
        }
        .print();
        Ok(())
    })
}
