//! Log throughput: appends of 16 KiB batches (1 KiB records) without fsync and with a
//! `sync_to` after every append, and reads of 1 MiB. The log lives under
//! `NAGARE_BENCH_DIR` (default: the system temp dir), so point it at the disk to measure.

use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use nagare_log::batch::{build_batch, NewRecord};
use nagare_log::{FlushPolicy, LogConfig, PartitionLog};

const RECORD: usize = 1024;
const RECORDS_PER_BATCH: usize = 16;

fn batch() -> Vec<u8> {
    let records: Vec<NewRecord> = (0..RECORDS_PER_BATCH)
        .map(|i| NewRecord {
            key: None,
            value: Some(Bytes::from(vec![b'a' + (i % 26) as u8; RECORD])),
            headers: vec![],
            timestamp: 1_700_000_000_000 + i as i64,
        })
        .collect();
    build_batch(&records).to_vec()
}

fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("NAGARE_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d).expect("bench dir"),
        None => tempfile::tempdir().expect("temp dir"),
    }
}

fn config(flush: FlushPolicy) -> LogConfig {
    LogConfig {
        segment_bytes: 256 << 20,
        // Keep the disk footprint bounded while criterion runs many iterations.
        retention_bytes: Some(512 << 20),
        retention: None,
        flush,
        ..LogConfig::default()
    }
}

fn append(c: &mut Criterion) {
    let template = batch();
    let mut group = c.benchmark_group("append_16k_batches");
    group.throughput(Throughput::Bytes(template.len() as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(8));
    for (name, always) in [("flush_never", false), ("sync_every_append", true)] {
        let dir = bench_dir();
        let policy = if always {
            FlushPolicy::Always
        } else {
            FlushPolicy::Never
        };
        let log = PartitionLog::open(dir.path(), config(policy)).unwrap();
        let mut buf = template.clone();
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    let info = log.append(&mut buf).unwrap();
                    if always {
                        log.sync_to(info.last_offset + 1).unwrap();
                    }
                }
                let took = start.elapsed();
                // Untimed: drop old segments so the bench does not fill the disk.
                log.apply_retention(i64::MAX).unwrap();
                took
            })
        });
    }
    // Group commit: four producers each waiting for their own fsync share them.
    let dir = bench_dir();
    let log = PartitionLog::open(dir.path(), config(FlushPolicy::Always)).unwrap();
    group.bench_function(
        BenchmarkId::from_parameter("sync_every_append_4_threads"),
        |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                std::thread::scope(|s| {
                    for t in 0..4u64 {
                        let log = &log;
                        let mut buf = template.clone();
                        s.spawn(move || {
                            for _ in (t..iters).step_by(4) {
                                let info = log.append(&mut buf).unwrap();
                                log.sync_to(info.last_offset + 1).unwrap();
                            }
                        });
                    }
                });
                let took = start.elapsed();
                log.apply_retention(i64::MAX).unwrap();
                took
            })
        },
    );
    group.finish();
}

fn read(c: &mut Criterion) {
    let template = batch();
    let dir = bench_dir();
    let log = PartitionLog::open(dir.path(), config(FlushPolicy::Never)).unwrap();
    let total: u64 = 256 << 20;
    let mut buf = template.clone();
    while log.size_bytes() < total {
        log.append(&mut buf).unwrap();
    }
    let end = log.log_end_offset();
    let mut group = c.benchmark_group("read_1mib");
    group.throughput(Throughput::Bytes(1 << 20));
    group.sample_size(20);
    let mut next = 0i64;
    group.bench_function("read_batches_copy", |b| {
        b.iter(|| {
            let got = log.read_batches(next, 1 << 20).unwrap();
            next = (next + 1009) % end;
            got.len()
        })
    });
    group.bench_function("locate_slices", |b| {
        b.iter(|| {
            let got = log.read(next, 1 << 20).unwrap();
            next = (next + 1009) % end;
            got.total_bytes
        })
    });
    group.finish();
}

criterion_group!(benches, append, read);
criterion_main!(benches);
