//! `nagare produce` and `nagare consume`: minimal Kafka-protocol clients of a running broker.

use nagare_core::log::now_ms;
use std::io::{BufRead, Write};

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::Args;
use nagare_kafka::client::Connection;
use nagare_log::batch::{build_batch, decode_records, NewRecord};

#[derive(Debug, Args)]
pub(crate) struct ProduceArgs {
    /// Kafka address of the broker.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Topic to produce to.
    #[arg(short, long)]
    pub topic: String,
    /// Partition to produce to.
    #[arg(short, long, default_value_t = 0)]
    pub partition: i32,
}

#[derive(Debug, Args)]
pub(crate) struct ConsumeArgs {
    /// Kafka address of the broker.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Topic to read.
    #[arg(short, long)]
    pub topic: String,
    /// Partition to read.
    #[arg(short, long, default_value_t = 0)]
    pub partition: i32,
    /// First offset to read (default: the earliest).
    #[arg(short, long)]
    pub offset: Option<i64>,
    /// Stop after this many records (or at the end, whichever comes first, unless
    /// --follow).
    #[arg(short = 'n', long)]
    pub count: Option<u64>,
    /// Keep waiting for new records at the end of the partition (like `tail -f`);
    /// without it, consume stops at the end offset there was when it started.
    #[arg(short, long)]
    pub follow: bool,
}

/// Lines per produced batch.
const LINES_PER_BATCH: usize = 1000;

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// Each line of standard input becomes one record (acks=all); prints the offsets.
pub(crate) fn produce(args: ProduceArgs) -> anyhow::Result<()> {
    runtime()?.block_on(async move {
        let mut conn = Connection::connect(&args.bootstrap)
            .await
            .with_context(|| format!("connecting to {}", args.bootstrap))?;
        conn.ensure_topic(&args.topic).await?;
        let stdin = std::io::stdin();
        let mut lines = stdin.lock().lines();
        let mut total = 0u64;
        loop {
            let mut records = Vec::new();
            for line in lines.by_ref().take(LINES_PER_BATCH) {
                records.push(NewRecord {
                    key: None,
                    value: Some(Bytes::from(line?)),
                    headers: Vec::new(),
                    timestamp: now_ms(),
                });
            }
            if records.is_empty() {
                break;
            }
            let n = records.len() as u64;
            let answer = conn
                .produce(
                    &args.topic,
                    args.partition,
                    build_batch(&records).freeze(),
                    -1,
                )
                .await?
                .context("no produce answer")?;
            if answer.error_code != 0 {
                bail!("produce failed with Kafka error code {}", answer.error_code);
            }
            eprintln!(
                "{n} record(s) at offsets {}..{}",
                answer.base_offset,
                answer.base_offset + n as i64 - 1
            );
            total += n;
        }
        eprintln!(
            "produced {total} record(s) to {}/{}",
            args.topic, args.partition
        );
        Ok(())
    })
}

/// Prints record values, one per line, from `--offset` (default: the earliest) until the
/// end offset the partition had at start or `--count` records, whichever comes first;
/// with `--follow`, past the end until `--count` (or forever).
pub(crate) fn consume(args: ConsumeArgs) -> anyhow::Result<()> {
    runtime()?.block_on(async move {
        let mut conn = Connection::connect(&args.bootstrap)
            .await
            .with_context(|| format!("connecting to {}", args.bootstrap))?;
        let mut offset = match args.offset {
            Some(o) => o,
            None => conn.list_offset(&args.topic, args.partition, -2).await?,
        };
        let end = conn.list_offset(&args.topic, args.partition, -1).await?;
        let mut printed = 0u64;
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        loop {
            if args.count.is_some_and(|c| printed >= c) || (!args.follow && offset >= end) {
                break;
            }
            let f = conn
                .fetch(&args.topic, args.partition, offset, 1 << 20, 1000)
                .await?;
            if f.error_code != 0 {
                bail!("fetch failed with Kafka error code {}", f.error_code);
            }
            let mut at = 0usize;
            while f.records.len() - at >= 12 {
                let len = i32::from_be_bytes(f.records[at + 8..at + 12].try_into()?) as usize + 12;
                if at + len > f.records.len() {
                    break;
                }
                let batch = &f.records[at..at + len];
                for r in decode_records(batch)? {
                    if r.offset < offset || args.count.is_some_and(|c| printed >= c) {
                        continue;
                    }
                    out.write_all(r.value.as_deref().unwrap_or_default())?;
                    out.write_all(b"\n")?;
                    printed += 1;
                    offset = r.offset + 1;
                }
                // A batch's last offsets may hold no record (compacted away, a control
                // batch): step past the whole batch so the end is reached all the same.
                if args.count.is_none_or(|c| printed < c) && batch.len() >= 27 {
                    let base = i64::from_be_bytes(batch[0..8].try_into()?);
                    let last_delta = i32::from_be_bytes(batch[23..27].try_into()?);
                    offset = offset.max(base + i64::from(last_delta) + 1);
                }
                at += len;
            }
        }
        out.flush()?;
        Ok(())
    })
}
