//! `nagare bench compact`: compaction throughput of the log cleaner, without a broker.
//! Fills one partition log with keyed records (a fixed key space written over several
//! times, in a pseudo-random order), rolls it, then runs the cleaner until the whole
//! log is clean and reports MB/s the way Kafka's `log-cleaner.log` does: bytes of log
//! processed (the segments rewritten) per second of cleaning, with the time spent
//! building the offset map shown apart.

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use nagare_core::log::batch::BatchWriter;
use nagare_core::log::cleaner::{Cleaner, CompactionConfig};
use nagare_core::log::{LogConfig, PartitionLog};

#[derive(Debug, Args)]
pub(crate) struct CompactArgs {
    /// Records to write.
    #[arg(long, short = 'n', default_value_t = 2_000_000)]
    pub records: u64,
    /// Distinct keys (records are spread over them).
    #[arg(long, default_value_t = 100_000)]
    pub keys: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    pub value_bytes: usize,
    /// Records per batch (as a producer with linger would send).
    #[arg(long, default_value_t = 100)]
    pub batch_records: usize,
    /// Segment size (Kafka's segment.bytes).
    #[arg(long, default_value_t = 64 << 20)]
    pub segment_bytes: u64,
    /// Offset map memory (log.cleaner.dedupe.buffer.size).
    #[arg(long, default_value_t = 32 << 20)]
    pub dedupe_buffer_bytes: usize,
    /// I/O limit in bytes per second (0: unlimited).
    #[arg(long, default_value_t = 0)]
    pub io_max_bytes_per_sec: u64,
    /// Directory for the log (a fresh subdirectory is made and removed).
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
}

pub(super) fn run(args: CompactArgs) -> anyhow::Result<()> {
    let parent = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let dir = parent.join(format!("nagare-bench-compact-{}", std::process::id()));
    let result = bench(&args, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn bench(args: &CompactArgs, dir: &std::path::Path) -> anyhow::Result<()> {
    let config = LogConfig {
        segment_bytes: args.segment_bytes,
        segment_age: Duration::from_secs(3600),
        retention: None,
        ..LogConfig::default()
    };
    let log = PartitionLog::open(dir, config.clone()).context("opening the bench log")?;
    let keys = args.keys.max(1);
    let value = vec![b'v'; args.value_bytes];
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let started = Instant::now();
    let mut written = 0u64;
    let now = nagare_core::log::now_ms();
    while written < args.records {
        let n = (args.records - written).min(args.batch_records.max(1) as u64);
        let mut w = BatchWriter::new(n as usize * (args.value_bytes + 24));
        for _ in 0..n {
            // xorshift: a key order with repeats spread over the whole log.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let key = format!("key-{:010}", state % keys);
            w.push(now, Some(key.as_bytes()), Some(&value), std::iter::empty());
        }
        let mut b = w.finish();
        log.append(&mut b).context("append")?;
        written += n;
    }
    // Reopened with a zero segment age so the active segment rolls: all of it is cleanable.
    log.close().context("close")?;
    drop(log);
    let log = PartitionLog::open(
        dir,
        LogConfig {
            segment_age: Duration::ZERO,
            ..config
        },
    )
    .context("reopening the bench log")?;
    log.maybe_roll().context("roll")?;
    let size = log.size_bytes();
    println!(
        "filled {} records over {} keys: {:.1} MB in {} segments ({:.1} s)",
        args.records,
        keys,
        size as f64 / 1e6,
        log.segment_count(),
        started.elapsed().as_secs_f64()
    );
    let cc = CompactionConfig {
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionConfig::default()
    };
    let mut cleaner = Cleaner::new(
        args.dedupe_buffer_bytes,
        (args.io_max_bytes_per_sec > 0).then_some(args.io_max_bytes_per_sec),
    );
    let started = Instant::now();
    let cpu_before = cpu_seconds();
    let (mut processed, mut read, mut passes) = (0u64, 0u64, 0);
    loop {
        let stats = log
            .clean(&mut cleaner, &cc, nagare_core::log::now_ms())
            .context("clean")?;
        passes += 1;
        processed += stats.bytes_before;
        read += stats.bytes_read;
        if !stats.map_full || stats.segments_before == 0 {
            break;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds().zip(cpu_before).map(|(a, b)| a - b);
    let after = log.size_bytes();
    println!(
        "cleaned in {passes} pass(es), {:.2} s: {:.1} MB of log processed ({:.1} MB read), {:.1} MB left",
        secs,
        processed as f64 / 1e6,
        read as f64 / 1e6,
        after as f64 / 1e6
    );
    println!(
        "compaction throughput: {:.1} MB/s (log processed per second)",
        processed as f64 / secs.max(1e-9) / 1e6
    );
    if let Some(cpu) = cpu {
        // On a shared machine wall time includes waiting for a core; CPU time does not.
        println!(
            "cpu time {:.2} s: {:.1} MB/s per busy core",
            cpu,
            processed as f64 / cpu.max(1e-9) / 1e6
        );
    }
    log.close().context("close")?;
    Ok(())
}

/// User + system CPU seconds of this process so far (Linux `/proc/self/stat`).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // Clock ticks are 100 a second on Linux.
    Some((utime + stime) / 100.0)
}
