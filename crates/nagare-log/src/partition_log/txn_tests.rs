//! Transactions in the log: the LSO, `.txnindex` entries, and both surviving roll,
//! clean and unclean restarts, a torn `.txnindex`, retention and truncation.

use bytes::Bytes;

use super::*;
use crate::batch::{build_batch, NewRecord};
use crate::control::{build_control_batch, set_producer};

fn small_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 64,
        retention: None,
        ..LogConfig::default()
    }
}

fn data(pid: Option<i64>, n: usize) -> bytes::BytesMut {
    let recs: Vec<NewRecord> = (0..n)
        .map(|i| NewRecord {
            value: Some(Bytes::from(format!("value-{i}"))),
            timestamp: 1_000,
            ..Default::default()
        })
        .collect();
    let mut b = build_batch(&recs);
    if let Some(pid) = pid {
        set_producer(&mut b, pid, 0, 0, true);
    }
    b
}

fn append(log: &PartitionLog, mut b: bytes::BytesMut) -> i64 {
    log.append(&mut b).expect("append").base_offset
}

fn marker(log: &PartitionLog, pid: i64, commit: bool) -> i64 {
    append(log, build_control_batch(pid, 0, commit, 0, 1_000))
}

#[test]
fn lso_and_aborted_index_follow_markers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = PartitionLog::open(dir.path(), LogConfig::default()).expect("open");
    append(&log, data(None, 2)); // 0..2
    assert_eq!(log.last_stable_offset(), 2);
    append(&log, data(Some(1), 2)); // 2..4
    append(&log, data(Some(2), 1)); // 4
    append(&log, data(None, 1)); // 5
    assert_eq!(log.last_stable_offset(), 2);
    assert_eq!(log.ongoing_transactions(), vec![(1, 2), (2, 4)]);
    assert_eq!(marker(&log, 1, false), 6);
    assert_eq!(log.last_stable_offset(), 4);
    let aborted = log.aborted_transactions(0, 7);
    assert_eq!(aborted.len(), 1);
    assert_eq!(
        (
            aborted[0].producer_id,
            aborted[0].first_offset,
            aborted[0].last_offset
        ),
        (1, 2, 6)
    );
    assert_eq!(aborted[0].last_stable_offset, 4, "producer 2 still open");
    assert!(log.aborted_transactions(7, 10).is_empty());
    assert!(log.aborted_transactions(0, 2).is_empty(), "begins at 2");
    assert_eq!(marker(&log, 2, true), 7);
    assert_eq!(log.last_stable_offset(), 8);
    // A committed read stops below an open transaction.
    append(&log, data(Some(3), 1)); // 8
    append(&log, data(None, 1)); // 9
    let r = log.read_committed(0, 1 << 20).expect("read");
    assert_eq!(r.next_offset, 8);
    assert_eq!(r.last_stable_offset, 8);
    assert_eq!(r.high_watermark, 10);
    assert_eq!(log.read_committed(8, 1 << 20).expect("read").total_bytes, 0);
    assert_eq!(log.read(0, 1 << 20).expect("read").next_offset, 10);
}

#[test]
fn state_survives_roll_and_clean_or_unclean_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = small_config(300);
    {
        let log = PartitionLog::open(dir.path(), config.clone()).expect("open");
        append(&log, data(Some(1), 3)); // 0..3, open
        for _ in 0..6 {
            append(&log, data(None, 3));
        }
        append(&log, data(Some(2), 1));
        marker(&log, 2, false);
        assert!(log.segment_count() > 2, "rolled");
        log.flush().expect("flush");
        append(&log, data(Some(4), 1));
        marker(&log, 4, false);
        log.close().expect("close");
    }
    let expect = |log: &PartitionLog| {
        assert_eq!(log.last_stable_offset(), 0, "producer 1 still open");
        let aborted: Vec<i64> = log
            .aborted_transactions(0, log.log_end_offset())
            .iter()
            .map(|e| e.producer_id)
            .collect();
        assert_eq!(aborted, vec![2, 4]);
    };
    let end;
    {
        let log = PartitionLog::open(dir.path(), config.clone()).expect("reopen clean");
        expect(&log);
        append(&log, data(Some(5), 1));
        marker(&log, 5, false);
        end = log.log_end_offset();
        // Crash: no close.
    }
    {
        let log = PartitionLog::open(dir.path(), config.clone()).expect("reopen unclean");
        assert_eq!(log.log_end_offset(), end);
        assert_eq!(log.aborted_transactions(0, end).len(), 3);
        marker(&log, 1, true);
        assert_eq!(log.last_stable_offset(), log.log_end_offset());
    }
    // Unclean again, with the active segment's .txnindex torn.
    let last = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txnindex"))
        .max()
        .expect("a txnindex");
    let len = std::fs::metadata(&last).expect("meta").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .and_then(|f| f.set_len(len - 5))
        .expect("tear");
    let log = PartitionLog::open(dir.path(), config).expect("reopen");
    assert_eq!(log.last_stable_offset(), log.log_end_offset());
    assert_eq!(log.aborted_transactions(0, log.log_end_offset()).len(), 3);
}

#[test]
fn retention_and_truncation_keep_the_index_consistent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = PartitionLog::open(dir.path(), small_config(300)).expect("open");
    append(&log, data(Some(1), 1));
    marker(&log, 1, false);
    for _ in 0..6 {
        append(&log, data(None, 3));
    }
    let second = append(&log, data(Some(2), 1));
    let m2 = marker(&log, 2, false);
    append(&log, data(Some(3), 1));
    let end = log.log_end_offset();
    assert_eq!(log.aborted_transactions(0, end).len(), 2);
    // Truncating away the marker of producer 2 reopens its transaction.
    log.truncate_to(m2).expect("truncate");
    assert_eq!(log.aborted_transactions(0, m2).len(), 1);
    assert_eq!(log.last_stable_offset(), second);
    marker(&log, 2, false);
    // Retention drops the first segment and its index.
    log.delete_records_before(second).expect("delete");
    assert_eq!(
        log.aborted_transactions(second, log.log_end_offset()).len(),
        1
    );
    log.close().expect("close");
    drop(log);
    let log = PartitionLog::open(dir.path(), small_config(300)).expect("reopen");
    assert_eq!(
        log.aborted_transactions(second, log.log_end_offset()).len(),
        1
    );
}
