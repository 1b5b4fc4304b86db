//! Zeros written ahead of a segment that is fsynced often (`Segment::prefill`): readers
//! never see them, and a close, a roll or a crash recovery cuts them off.

use bytes::Bytes;

use super::*;
use crate::batch::{build_batch, NewRecord};

fn sized_batch(i: usize, size: usize) -> Vec<u8> {
    build_batch(&[NewRecord {
        value: Some(Bytes::from(vec![b'a' + (i % 26) as u8; size])),
        timestamp: i as i64,
        ..Default::default()
    }])
    .to_vec()
}

fn log_file_len(dir: &Path, base: i64) -> u64 {
    let name = format!("{base:020}.log");
    std::fs::metadata(dir.join(name)).unwrap().len()
}

/// Appends `n` one-record batches, fsyncing after each; returns their bytes.
fn append_synced(log: &PartitionLog, n: usize) -> Vec<Vec<u8>> {
    append_synced_sized(log, n, 1000)
}

fn append_synced_sized(log: &PartitionLog, n: usize, size: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..n {
        let mut b = sized_batch(i, size);
        let info = log.append(&mut b).unwrap();
        log.sync_to(info.last_offset + 1).unwrap();
        out.push(b);
    }
    out
}

fn assert_reads(log: &PartitionLog, written: &[Vec<u8>]) {
    let got = log.read_batches(0, u64::MAX).unwrap();
    assert_eq!(got.len(), written.len());
    for (g, w) in got.iter().zip(written) {
        assert_eq!(&g[..], &w[..]);
    }
}

fn data_len(written: &[Vec<u8>]) -> u64 {
    written.iter().map(|b| b.len() as u64).sum()
}

#[test]
fn zeros_ahead_of_a_busy_segment_stay_unseen_and_a_close_cuts_them() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
    let mut written = append_synced(&log, 10);
    // A segment fsynced now and then gets no zeros.
    assert_eq!(log_file_len(dir.path(), 0), data_len(&written));
    written.extend(append_synced(&log, 30));
    let len = log_file_len(dir.path(), 0);
    assert!(
        len > data_len(&written),
        "file {len} bytes for {} of batches",
        data_len(&written)
    );
    assert_eq!(log.log_end_offset(), 40);
    assert_reads(&log, &written);
    log.close().unwrap();
    assert_eq!(log_file_len(dir.path(), 0), data_len(&written));
    drop(log);

    let log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.log_end_offset(), 40);
    let more = append_synced(&log, 5);
    written.extend(more);
    assert_reads(&log, &written);
}

#[test]
fn a_crash_with_zeros_ahead_keeps_every_batch_and_cuts_the_zeros() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
    let mut written = append_synced(&log, 40);
    assert!(log_file_len(dir.path(), 0) > data_len(&written));
    drop(log); // crash: no close, no clean-shutdown marker

    let log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
    assert!(!log.opened_clean);
    assert_eq!(log.log_end_offset(), 40);
    assert_eq!(log_file_len(dir.path(), 0), data_len(&written));
    assert_reads(&log, &written);
    written.extend(append_synced(&log, 3));
    assert_eq!(log.log_end_offset(), 43);
    assert_reads(&log, &written);
}

#[test]
fn a_rolled_segment_ends_at_its_last_batch() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 60 * 1024,
        ..LogConfig::default()
    };
    let log = PartitionLog::open(dir.path(), config.clone()).unwrap();
    let written = append_synced(&log, 80);
    let bases: Vec<i64> = log.segments.read().iter().map(|s| s.base).collect();
    assert!(bases.len() >= 2, "{bases:?}");
    let mut from = 0;
    for w in bases.windows(2) {
        let (base, next) = (w[0], w[1]);
        let bytes = data_len(&written[from..next as usize]);
        assert_eq!(log_file_len(dir.path(), base), bytes, "segment {base}");
        from = next as usize;
    }
    assert_reads(&log, &written);
    log.close().unwrap();
    drop(log);
    let log = PartitionLog::open(dir.path(), config).unwrap();
    assert_eq!(log.log_end_offset(), 80);
    assert_reads(&log, &written);
}

#[test]
fn the_stretch_of_zeros_follows_the_bytes_per_fsync() {
    use crate::segment::prefill::MAX_AHEAD as MAX_PREFILL;
    // About 100 B per fsync: the smallest stretch.
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
    let written = append_synced_sized(&log, 40, 30);
    let zeros = log_file_len(dir.path(), 0) - data_len(&written);
    assert!(zeros > 0 && zeros <= 64 * 1024, "{zeros}");
    drop(log);
    // 32 KiB per fsync: 64 of them would be 2 MiB, so the largest stretch.
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
    let written = append_synced_sized(&log, 40, 32 * 1024);
    let zeros = log_file_len(dir.path(), 0) - data_len(&written);
    assert!(zeros > MAX_PREFILL / 2 && zeros <= MAX_PREFILL, "{zeros}");
    drop(log);
    // 256 KiB per fsync: the zeros would cost more writing than they save, so none.
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
    let written = append_synced_sized(&log, 24, 256 * 1024);
    assert_eq!(log_file_len(dir.path(), 0), data_len(&written));
}
