use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;

use super::compact::CRASH_AT;
use super::*;
use crate::batch::{build_batch, decode_records, NewRecord};
use crate::cleaner::{Cleaner, CompactionConfig, SLOT_BYTES};

fn kv(key: &str, value: Option<&str>, ts: i64) -> NewRecord {
    NewRecord {
        key: Some(Bytes::copy_from_slice(key.as_bytes())),
        value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        headers: Vec::new(),
        timestamp: ts,
    }
}

fn config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 128,
        retention: None,
        ..LogConfig::default()
    }
}

fn eager() -> CompactionConfig {
    CompactionConfig {
        delete_retention_ms: 1_000,
        min_compaction_lag_ms: 0,
        max_compaction_lag_ms: i64::MAX,
        min_cleanable_dirty_ratio: 0.0,
    }
}

/// Every record from the start: (offset, key, value).
fn all(log: &PartitionLog) -> Vec<(i64, String, Option<String>)> {
    let mut out = Vec::new();
    let mut at = log.log_start_offset();
    while at < log.log_end_offset() {
        let res = log.read(at, 1 << 20).unwrap();
        let next = res.next_offset;
        for b in log.read_batches(at, 1 << 20).unwrap() {
            for r in decode_records(&b).unwrap() {
                if r.offset >= at {
                    out.push((
                        r.offset,
                        r.key
                            .map(|k| String::from_utf8(k.to_vec()).unwrap())
                            .unwrap_or_default(),
                        r.value.map(|v| String::from_utf8(v.to_vec()).unwrap()),
                    ));
                }
            }
        }
        assert!(next > at, "read made no progress at {at}");
        at = next;
    }
    out
}

/// Latest value per key as written: what a fully compacted log holds.
fn latest(log: &PartitionLog) -> BTreeMap<String, Option<String>> {
    all(log).into_iter().map(|(_, k, v)| (k, v)).collect()
}

/// Appends `n` records over `keys` keys, one record per batch, values `v<i>`.
fn fill(log: &PartitionLog, n: usize, keys: usize, ts: i64) {
    for i in 0..n {
        let mut b = build_batch(&[kv(&format!("k{}", i % keys), Some(&format!("v{i}")), ts)]);
        log.append(&mut b).unwrap();
    }
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn keeps_the_latest_record_per_key_and_reads_across_holes() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), config(1_000)).unwrap();
    fill(&log, 300, 10, 1);
    let before = latest(&log);
    let segments_before = log.segment_count();
    let size_before = log.size_bytes();
    let mut cleaner = Cleaner::new(1 << 20, None);
    let c = log.cleanability(&eager(), 10);
    assert!(c.needs_cleaning(&eager()) && c.clean_bytes == 0);
    let stats = log.clean(&mut cleaner, &eager(), 10).unwrap();
    assert!(!stats.map_full && stats.records_removed > 0, "{stats:?}");
    // Groups are formed from the sources' sizes (as Kafka does), so a first pass over
    // full segments keeps their number; it shrinks them.
    assert!(log.size_bytes() < size_before / 2 && log.segment_count() <= segments_before);
    let after = all(&log);
    // Only the active segment may still hold several records of a key.
    let active_base = log.segments.read().last().unwrap().base;
    let cleaned: Vec<_> = after.iter().filter(|r| r.0 < active_base).collect();
    let mut keys: Vec<_> = cleaned.iter().map(|r| r.1.clone()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), cleaned.len(), "one record per key: {cleaned:?}");
    assert_eq!(latest(&log), before);
    // Offsets kept their values: a read from a hole gets the next batch.
    let first_kept = after[0].0;
    let hole = (0..first_kept.max(1)).find(|o| !after.iter().any(|r| r.0 == *o));
    if let Some(hole) = hole {
        let res = log.read(hole, 1).unwrap();
        assert!(res.total_bytes > 0);
    }
    for w in after.windows(2) {
        assert!(w[0].0 < w[1].0);
    }
    // A second pass with nothing new is a no-op; the checkpoint moved.
    assert!(!log.cleanability(&eager(), 10).needs_cleaning(&eager()));
    assert_eq!(log.first_dirty_offset(), active_base);
    // Reopening (unclean: no close) rebuilds cleaned segments with holes intact.
    drop(log);
    let log = PartitionLog::open(dir.path(), config(1_000)).unwrap();
    assert_eq!(all(&log), after);
    assert_eq!(log.log_end_offset(), 300);
    let mut b = build_batch(&[kv("k1", Some("new"), 2)]);
    assert_eq!(log.append(&mut b).unwrap().base_offset, 300);
}

#[test]
fn tombstones_stay_for_delete_retention_after_cleaning() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), config(600)).unwrap();
    fill(&log, 20, 4, 1);
    let mut b = build_batch(&[kv("k1", None, 1)]);
    log.append(&mut b).unwrap();
    fill(&log, 40, 2, 1); // only k0 and k1... of which k1 again
    let mut b = build_batch(&[kv("gone", Some("x"), 1)]);
    log.append(&mut b).unwrap();
    let mut b = build_batch(&[kv("gone", None, 1)]);
    log.append(&mut b).unwrap();
    fill(&log, 30, 1, 1); // push everything above out of the active segment
    let cfg = eager();
    let mut cleaner = Cleaner::new(1 << 20, None);
    log.clean(&mut cleaner, &cfg, 10_000).unwrap();
    let has_tombstone =
        |log: &PartitionLog| all(log).iter().any(|r| r.1 == "gone" && r.2.is_none());
    assert!(has_tombstone(&log), "a tombstone survives its first clean");
    assert!(!all(&log).iter().any(|r| r.1 == "gone" && r.2.is_some()));
    // More dirty data, cleaned before delete.retention.ms passed: still there.
    fill(&log, 30, 1, 1);
    log.clean(&mut cleaner, &cfg, 10_500).unwrap();
    assert!(has_tombstone(&log));
    // Once it has been clean for delete.retention.ms, the next pass removes it.
    fill(&log, 30, 1, 1);
    let stats = log.clean(&mut cleaner, &cfg, 11_001).unwrap();
    assert!(stats.tombstones_removed >= 1, "{stats:?}");
    assert!(!has_tombstone(&log));
    assert!(!all(&log).iter().any(|r| r.1 == "gone"));
}

#[test]
fn min_lag_max_lag_and_dirty_ratio_decide_what_is_cleanable() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), config(800)).unwrap();
    fill(&log, 60, 3, 1_000);
    fill(&log, 60, 3, 5_000);
    let mut cleaner = Cleaner::new(1 << 20, None);
    // min.compaction.lag.ms: segments with records newer than now - lag stay dirty.
    let lagged = CompactionConfig {
        min_compaction_lag_ms: 2_000,
        ..eager()
    };
    let stats = log.clean(&mut cleaner, &lagged, 6_000).unwrap();
    let first_dirty = log.first_dirty_offset();
    assert!(
        first_dirty > 0 && first_dirty <= 60,
        "{stats:?} {first_dirty}"
    );
    assert!(
        all(&log)
            .iter()
            .filter(|r| r.0 >= first_dirty && r.1 == "k0")
            .count()
            > 2
    );
    // min.cleanable.dirty.ratio: the young part is dirty but below a high ratio.
    let picky = CompactionConfig {
        min_cleanable_dirty_ratio: 0.99,
        ..eager()
    };
    let c = log.cleanability(&picky, 100_000);
    assert!(c.dirty_bytes > 0 && !c.needs_cleaning(&picky), "{c:?}");
    // max.compaction.lag.ms: overdue dirty records are cleaned whatever the ratio.
    let overdue = CompactionConfig {
        max_compaction_lag_ms: 10_000,
        ..picky.clone()
    };
    // (The first dirty segment starts with records written at 1 000.)
    assert!(!log.cleanability(&overdue, 10_500).needs_cleaning(&overdue));
    assert!(log.cleanability(&overdue, 11_500).needs_cleaning(&overdue));
}

#[test]
fn a_small_map_cleans_in_several_passes() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), config(2_000)).unwrap();
    // 400 distinct keys written twice: far more keys than the map holds.
    for round in 0..2 {
        for i in 0..400 {
            let mut b = build_batch(&[kv(&format!("key{i}"), Some(&format!("r{round}")), 1)]);
            log.append(&mut b).unwrap();
        }
    }
    fill(&log, 40, 1, 1);
    let before = latest(&log);
    let mut cleaner = Cleaner::new(SLOT_BYTES * 100, None);
    assert!(cleaner.map.capacity() < 100 && cleaner.map.memory_bytes() <= SLOT_BYTES * 100);
    let mut passes = 0;
    loop {
        let stats = log.clean(&mut cleaner, &eager(), 10).unwrap();
        passes += 1;
        assert!(stats.map_entries <= cleaner.map.capacity());
        if !stats.map_full {
            break;
        }
        assert!(passes < 100, "no progress");
    }
    assert!(passes >= 8, "{passes} passes");
    assert_eq!(latest(&log), before);
    let active_base = log.segments.read().last().unwrap().base;
    let rows = all(&log);
    let cleaned: Vec<_> = rows.iter().filter(|r| r.0 < active_base).collect();
    assert!(
        cleaned.iter().all(|r| r.2.as_deref() != Some("r0")),
        "old round left"
    );
    assert_eq!(
        cleaned.iter().filter(|r| r.1.starts_with("key")).count(),
        400
    );
}

#[test]
fn a_crash_at_any_swap_step_recovers_to_a_consistent_log() {
    for step in 1..=5u8 {
        let dir = tempfile::tempdir().unwrap();
        let log = PartitionLog::open(dir.path(), config(700)).unwrap();
        fill(&log, 120, 5, 1);
        let before = latest(&log);
        let end = log.log_end_offset();
        let mut cleaner = Cleaner::new(1 << 20, None);
        CRASH_AT.with(|c| c.set(step));
        let res = log.clean(&mut cleaner, &eager(), 10);
        CRASH_AT.with(|c| c.set(0));
        assert!(res.is_err(), "step {step}");
        drop(log);
        let log = PartitionLog::open(dir.path(), config(700)).unwrap();
        let names = files(dir.path());
        assert!(
            !names
                .iter()
                .any(|n| n.ends_with(".cleaned") || n.ends_with(".swap")),
            "step {step}: {names:?}"
        );
        assert_eq!(log.log_end_offset(), end, "step {step}");
        assert_eq!(latest(&log), before, "step {step}");
        // And the log cleans fine afterwards.
        log.clean(&mut cleaner, &eager(), 10).unwrap();
        assert_eq!(latest(&log), before, "step {step}");
        drop(log);
        let log = PartitionLog::open(dir.path(), config(700)).unwrap();
        assert_eq!(latest(&log), before, "step {step}");
        log.close().unwrap();
    }
}

#[test]
fn keyless_records_and_compressed_batches() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), config(500)).unwrap();
    let mut b = build_batch(&[NewRecord {
        value: Some(Bytes::from_static(b"no key")),
        timestamp: 1,
        ..Default::default()
    }]);
    log.append(&mut b).unwrap();
    // A batch of several records for the same keys: filtered record by record.
    let mut b = build_batch(&[
        kv("a", Some("1"), 1),
        kv("b", Some("1"), 1),
        kv("a", Some("2"), 1),
    ]);
    log.append(&mut b).unwrap();
    fill(&log, 30, 2, 1);
    let mut cleaner = Cleaner::new(1 << 20, None);
    log.clean(&mut cleaner, &eager(), 10).unwrap();
    let rows = all(&log);
    assert!(rows.iter().all(|r| !r.1.is_empty()));
    assert!(rows.iter().any(|r| r.1 == "b"));
    assert!(!rows
        .iter()
        .any(|r| r.1 == "a" && r.2.as_deref() == Some("1")));
}

#[test]
fn aborted_data_never_wins_and_open_transactions_are_not_cleaned() {
    use crate::control::{build_control_batch, set_producer};
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), config(600)).unwrap();
    let txn = |log: &PartitionLog, pid: i64, key: &str, value: &str| {
        let mut b = build_batch(&[kv(key, Some(value), 1)]);
        set_producer(&mut b, pid, 0, 0, true);
        log.append(&mut b).unwrap();
    };
    fill(&log, 20, 2, 1); // k0, k1 committed (non-transactional)
    txn(&log, 7, "k0", "aborted");
    let mut m = build_control_batch(7, 0, false, 0, 1);
    log.append(&mut m).unwrap();
    txn(&log, 8, "k1", "committed-txn");
    let mut m = build_control_batch(8, 0, true, 0, 1);
    log.append(&mut m).unwrap();
    // An open transaction (pid 9) holds the LSO back.
    txn(&log, 9, "k1", "open");
    let lso = log.last_stable_offset();
    fill(&log, 60, 1, 1);
    assert!(log.last_stable_offset() == lso && lso < log.log_end_offset());
    let mut cleaner = Cleaner::new(1 << 20, None);
    log.clean(&mut cleaner, &eager(), 10).unwrap();
    assert!(
        log.first_dirty_offset() <= lso,
        "nothing past the LSO is cleaned"
    );
    let rows = all(&log);
    assert!(!rows.iter().any(|r| r.2.as_deref() == Some("aborted")));
    assert_eq!(
        rows.iter()
            .rfind(|r| r.1 == "k0" && r.0 < lso)
            .unwrap()
            .2
            .as_deref(),
        Some("v18"),
        "k0's latest committed value stays: {rows:?}"
    );
    assert!(rows.iter().any(|r| r.2.as_deref() == Some("committed-txn")));
    assert!(rows.iter().any(|r| r.2.as_deref() == Some("open")));
    // Reopened, the cleaned log still answers read-committed readers.
    drop(log);
    let log = PartitionLog::open(dir.path(), config(600)).unwrap();
    assert_eq!(all(&log), rows);
}

/// Every batch header from the start, in order.
fn headers(log: &PartitionLog) -> Vec<crate::batch::BatchHeader> {
    let mut out = Vec::new();
    let mut at = log.log_start_offset();
    while at < log.log_end_offset() {
        let batches = log.read_batches(at, 1 << 20).unwrap();
        assert!(!batches.is_empty(), "no batch at {at}");
        for b in batches {
            let h = crate::batch::parse_header(&b).unwrap();
            at = h.last_offset() + 1;
            out.push(h);
        }
    }
    out
}

/// The markers left: (offset, producer id, delete horizon).
fn markers(log: &PartitionLog) -> Vec<(i64, i64, Option<i64>)> {
    headers(log)
        .iter()
        .filter(|h| h.is_control() && h.record_count > 0)
        .map(|h| {
            (
                h.base_offset,
                h.producer_id,
                crate::cleaner::marker::delete_horizon(h),
            )
        })
        .collect()
}

#[test]
fn markers_go_once_their_data_is_gone_and_their_horizon_passed() {
    use crate::control::{build_control_batch, set_producer};
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), config(600)).unwrap();
    let txn = |log: &PartitionLog, pid: i64, key: &str, value: &str| {
        let mut b = build_batch(&[kv(key, Some(value), 1)]);
        set_producer(&mut b, pid, 0, 0, true);
        log.append(&mut b).unwrap();
    };
    let marker = |log: &PartitionLog, pid: i64, commit: bool| {
        let mut m = build_control_batch(pid, 0, commit, 0, 1);
        log.append(&mut m).unwrap().base_offset
    };
    txn(&log, 7, "k0", "aborted");
    let abort7 = marker(&log, 7, false);
    txn(&log, 8, "k1", "committed, overwritten later");
    let commit8 = marker(&log, 8, true);
    txn(&log, 9, "kept", "committed and kept");
    let commit9 = marker(&log, 9, true);
    fill(&log, 40, 2, 1); // overwrites k0 and k1
    let cfg = eager(); // delete.retention.ms = 1 000
    let mut cleaner = Cleaner::new(1 << 20, None);
    let end = log.log_end_offset();
    assert_eq!(log.aborted_transactions(0, end).len(), 1);

    // First pass: the aborted data and pid 8's overwritten record go; their markers get a
    // delete horizon (now + delete.retention.ms); pid 9's marker has data, it stays as is.
    let stats = log.clean(&mut cleaner, &cfg, 10_000).unwrap();
    assert_eq!(stats.markers_removed, 0);
    assert_eq!(
        markers(&log),
        vec![
            (abort7, 7, Some(11_000)),
            (commit8, 8, Some(11_000)),
            (commit9, 9, None)
        ]
    );
    assert!(!all(&log).iter().any(|r| r.1 == "k1" && r.0 < commit8));
    assert_eq!(
        log.aborted_transactions(0, end).len(),
        1,
        "entry kept with marker"
    );

    // Before the horizon: still there.
    fill(&log, 30, 1, 1);
    let stats = log.clean(&mut cleaner, &cfg, 10_999).unwrap();
    assert_eq!(stats.markers_removed, 0);
    assert_eq!(markers(&log).len(), 3);

    // After it: both dataless markers go, the ABORT one's .txnindex entry with it.
    fill(&log, 30, 1, 1);
    let stats = log.clean(&mut cleaner, &cfg, 11_000).unwrap();
    assert_eq!(stats.markers_removed, 2, "{stats:?}");
    assert_eq!(markers(&log), vec![(commit9, 9, None)]);
    assert!(log.aborted_transactions(0, log.log_end_offset()).is_empty());
    assert!(all(&log)
        .iter()
        .any(|r| r.2.as_deref() == Some("committed and kept")));
    let rows = all(&log);

    // Reopened without a clean close (the transaction state is rescanned): the same
    // records, no aborted entry, no transaction left open.
    drop(log);
    let log = PartitionLog::open(dir.path(), config(600)).unwrap();
    assert_eq!(all(&log), rows);
    assert!(log.aborted_transactions(0, log.log_end_offset()).is_empty());
    assert_eq!(log.last_stable_offset(), log.log_end_offset());
    assert!(log.ongoing_transactions().is_empty());
    assert_eq!(markers(&log), vec![(commit9, 9, None)]);

    // A transaction checkpoint older than the removal (written before pid 8's marker,
    // listing its transaction as open) must not reopen it: it began in the clean section.
    drop(log);
    std::fs::write(
        dir.path().join("txn-checkpoint"),
        format!("0\n8 {}\n", commit8 - 1),
    )
    .unwrap();
    let log = PartitionLog::open(dir.path(), config(600)).unwrap();
    assert!(log.ongoing_transactions().is_empty());
    assert_eq!(log.last_stable_offset(), log.log_end_offset());
    assert_eq!(all(&log), rows);
}

#[test]
fn an_emptied_transactional_batch_at_a_group_end_is_not_transactional() {
    use crate::control::{build_control_batch, set_producer};
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), config(400)).unwrap();
    // Transactional data, overwritten, then its marker. An emptied batch kept at a group
    // end must not read as transactional: once the marker is removed, a rescan would
    // take it for a transaction that never ends.
    for i in 0..6 {
        let mut b = build_batch(&[kv("t", Some(&format!("txn{i}")), 1)]);
        set_producer(&mut b, 5, 0, i, true);
        log.append(&mut b).unwrap();
    }
    let mut m = build_control_batch(5, 0, true, 0, 1);
    log.append(&mut m).unwrap();
    fill(&log, 60, 1, 1);
    let mut cleaner = Cleaner::new(1 << 20, None);
    log.clean(&mut cleaner, &eager(), 10).unwrap();
    let hs = headers(&log);
    // (The case at hand: a group ended on one of the transaction's emptied batches.)
    assert!(
        hs.iter().any(|h| h.record_count == 0 && h.producer_id == 5),
        "{hs:?}"
    );
    assert!(hs
        .iter()
        .all(|h| h.record_count > 0 || !(h.is_transactional() || h.is_control())));
    drop(log);
    // No txn checkpoint: remove it to force a full rescan.
    let _ = std::fs::remove_file(dir.path().join("txn-checkpoint"));
    let log = PartitionLog::open(dir.path(), config(400)).unwrap();
    assert!(log.ongoing_transactions().is_empty());
    assert_eq!(log.last_stable_offset(), log.log_end_offset());
}

#[test]
fn compressed_batches_stay_compressed_after_cleaning() {
    use crate::batch::Compression;
    use crate::recompress::{recompress, TargetCodec};
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), config(2_000)).unwrap();
    for round in 0..4 {
        let records: Vec<NewRecord> = (0..20)
            .map(|i| {
                kv(
                    &format!("k{i}"),
                    Some(&format!("round {round} value value")),
                    1,
                )
            })
            .collect();
        // Keys k0..k9 are overwritten by the next round only in even rounds' first half.
        let records = if round % 2 == 1 {
            records[..10].to_vec()
        } else {
            records
        };
        let mut b = recompress(
            &build_batch(&records),
            TargetCodec::default_for(Compression::Zstd),
        )
        .unwrap()
        .unwrap();
        log.append(&mut b).unwrap();
    }
    fill(&log, 40, 1, 1);
    let before = latest(&log);
    let mut cleaner = Cleaner::new(1 << 20, None);
    let stats = log.clean(&mut cleaner, &eager(), 10).unwrap();
    assert!(stats.records_removed > 0, "{stats:?}");
    assert_eq!(latest(&log), before);
    let data: Vec<_> = headers(&log)
        .into_iter()
        .filter(|h| h.record_count > 1)
        .collect();
    assert!(!data.is_empty());
    assert!(
        data.iter()
            .all(|h| h.compression().unwrap() == Compression::Zstd),
        "{data:?}"
    );
}

#[test]
fn max_compaction_lag_rolls_a_quiet_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), config(1 << 20)).unwrap();
    fill(&log, 50, 5, 1_000);
    let lagged = CompactionConfig {
        max_compaction_lag_ms: 5_000,
        ..eager()
    };
    // Nothing is cleanable while everything sits in the active segment.
    assert_eq!(log.cleanability(&lagged, 100_000).dirty_bytes, 0);
    // Without a max lag, or before it: no roll.
    assert!(!log.roll_if_compaction_overdue(&eager(), 100_000).unwrap());
    assert!(!log.roll_if_compaction_overdue(&lagged, 5_999).unwrap());
    assert_eq!(log.segment_count(), 1);
    // Past it: the active segment rolls, the records become cleanable and get compacted.
    assert!(log.roll_if_compaction_overdue(&lagged, 6_001).unwrap());
    assert_eq!(log.segment_count(), 2);
    let c = log.cleanability(&lagged, 6_001);
    assert!(c.overdue && c.needs_cleaning(&lagged), "{c:?}");
    let mut cleaner = Cleaner::new(1 << 20, None);
    log.clean(&mut cleaner, &lagged, 6_001).unwrap();
    assert_eq!(all(&log).len(), 5);
    // An empty active segment is never rolled.
    assert!(!log.roll_if_compaction_overdue(&lagged, 100_000).unwrap());
}

#[test]
fn a_quiet_partition_drops_markers_and_tombstones_at_their_horizon() {
    use crate::control::{build_control_batch, set_producer};
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), config(600)).unwrap();
    let mut b = build_batch(&[kv("k1", Some("in a transaction"), 1)]);
    set_producer(&mut b, 8, 0, 0, true);
    log.append(&mut b).unwrap();
    let mut m = build_control_batch(8, 0, true, 0, 1);
    log.append(&mut m).unwrap();
    fill(&log, 20, 2, 1);
    let mut b = build_batch(&[kv("gone", Some("x"), 1)]);
    log.append(&mut b).unwrap();
    let mut b = build_batch(&[kv("gone", None, 1)]);
    log.append(&mut b).unwrap();
    assert!(log.roll_for_cleaning().unwrap());
    let cfg = eager(); // delete.retention.ms = 1 000
    let mut cleaner = Cleaner::new(1 << 20, None);
    let stats = log.clean(&mut cleaner, &cfg, 10_000).unwrap();
    assert_eq!((stats.markers_removed, stats.tombstones_removed), (0, 0));
    assert_eq!(markers(&log).len(), 1);
    // Nothing is written any more: nothing is dirty, a pass is due at the horizon only.
    let c = log.cleanability(&cfg, 10_999);
    assert!(c.dirty_bytes == 0 && !c.needs_cleaning(&cfg), "{c:?}");
    let c = log.cleanability(&cfg, 11_000);
    assert!(c.horizon_due && c.needs_cleaning(&cfg), "{c:?}");
    let before = all(&log);
    let stats = log.clean(&mut cleaner, &cfg, 11_000).unwrap();
    assert_eq!(
        (stats.markers_removed, stats.tombstones_removed),
        (1, 1),
        "{stats:?}"
    );
    assert!(markers(&log).is_empty());
    let after = all(&log);
    assert!(!after.iter().any(|r| r.1 == "gone"));
    assert_eq!(
        after,
        before
            .into_iter()
            .filter(|r| r.1 != "gone")
            .collect::<Vec<_>>()
    );
    // And then nothing is due any more.
    assert!(!log.cleanability(&cfg, 1_000_000).needs_cleaning(&cfg));
    assert_eq!(log.log_end_offset(), 24);
}
