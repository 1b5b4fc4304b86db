//! Transactions through a real broker in a temporary directory: the LSO, aborted
//! transactions, fencing, and the state surviving a restart.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use nagare_log::batch::{build_batch, NewRecord};

use super::*;
use crate::{Broker, BrokerConfig, TopicConfig};

fn open(dir: &std::path::Path) -> Arc<Broker> {
    Broker::open(BrokerConfig {
        data_dir: dir.to_path_buf(),
        ..BrokerConfig::default()
    })
    .expect("broker opens")
}

fn partition(broker: &Broker) -> Arc<Partition> {
    if broker.topic("t").is_none() {
        broker
            .create_topic("t", Some(1), TopicConfig::default())
            .expect("topic created");
    }
    broker.partition("t", 0).expect("partition")
}

/// A batch of `values` from a producer: transactional or only idempotent.
pub(crate) fn producer_batch(
    pid: i64,
    epoch: i16,
    seq: i32,
    transactional: bool,
    values: &[&str],
) -> BytesMut {
    let records: Vec<NewRecord> = values
        .iter()
        .map(|v| NewRecord {
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            timestamp: 1_700_000_000_000,
            ..Default::default()
        })
        .collect();
    let mut b = build_batch(&records);
    nagare_log::control::set_producer(&mut b, pid, epoch, seq, transactional);
    b
}

fn plain(values: &[&str]) -> BytesMut {
    let records: Vec<NewRecord> = values
        .iter()
        .map(|v| NewRecord {
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            ..Default::default()
        })
        .collect();
    build_batch(&records)
}

#[tokio::test]
async fn lso_stops_at_an_open_transaction_until_its_marker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = open(dir.path());
    let p = partition(&broker);
    p.append(plain(&["a"]), AckLevel::Leader)
        .await
        .expect("append");
    assert_eq!(p.last_stable_offset(), 1);
    let first = p
        .append(
            producer_batch(7, 0, 0, true, &["t1", "t2"]),
            AckLevel::Leader,
        )
        .await
        .expect("append");
    assert_eq!(first.base_offset, 1);
    p.append(plain(&["b"]), AckLevel::Leader)
        .await
        .expect("append");
    assert_eq!(p.high_watermark(), 4);
    assert_eq!(p.last_stable_offset(), 1);
    let read = p.log().unwrap().read_committed(0, 1 << 20).expect("read");
    assert_eq!(read.next_offset, 1, "a committed read stops at the LSO");
    let rx = p.subscribe_stable();
    let marker = p.write_txn_marker(7, 0, true, 5).await.expect("marker");
    assert_eq!(marker, 4);
    assert_eq!(p.last_stable_offset(), 5);
    assert_eq!(*rx.borrow(), 5, "the LSO watch moved");
    assert!(p.aborted_transactions(0, 5).is_empty());
    assert!(p.flushed_offset() >= 5, "the marker is durable");
    let states = p.producer_states();
    assert_eq!(states.len(), 1);
    assert_eq!(states[0].producer_id, 7);
    assert_eq!(states[0].last_sequence, 1);
    assert_eq!(states[0].coordinator_epoch, 5);
    assert!(states[0].last_timestamp >= 1_700_000_000_000);
    assert_eq!(states[0].current_txn_start_offset, -1);
}

#[tokio::test]
async fn an_abort_is_indexed_and_survives_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let broker = open(dir.path());
        let p = partition(&broker);
        p.append(producer_batch(1, 0, 0, true, &["x"]), AckLevel::Leader)
            .await
            .expect("append");
        p.append(producer_batch(2, 0, 0, true, &["y"]), AckLevel::Leader)
            .await
            .expect("append");
        assert_eq!(p.write_txn_marker(1, 0, false, 0).await.expect("abort"), 2);
        assert_eq!(p.last_stable_offset(), 1, "producer 2 is still open");
        assert_eq!(
            p.aborted_transactions(0, 3),
            vec![AbortedTxn {
                producer_id: 1,
                first_offset: 0
            }]
        );
        let states = p.producer_states();
        assert_eq!(states[1].current_txn_start_offset, 1);
        broker.shutdown().expect("shutdown");
    }
    let broker = open(dir.path());
    let p = partition(&broker);
    assert_eq!(
        p.last_stable_offset(),
        1,
        "the open transaction is remembered"
    );
    assert_eq!(p.aborted_transactions(0, 3).len(), 1);
    assert!(p.aborted_transactions(3, 10).is_empty(), "ends before 3");
    p.write_txn_marker(2, 0, true, 0).await.expect("commit");
    assert_eq!(p.last_stable_offset(), 4);
    assert!(dir
        .path()
        .join("t-0/00000000000000000000.txnindex")
        .exists());
}

#[tokio::test]
async fn stale_epochs_are_fenced_by_markers_and_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = open(dir.path());
    let p = partition(&broker);
    p.append(producer_batch(9, 3, 0, true, &["a"]), AckLevel::Leader)
        .await
        .expect("append");
    // The coordinator aborts with a bumped epoch (a timed-out transaction).
    p.write_txn_marker(9, 4, false, 0).await.expect("abort");
    let zombie = p
        .append(producer_batch(9, 3, 1, true, &["z"]), AckLevel::Leader)
        .await;
    assert!(
        matches!(
            zombie,
            Err(CoreError::InvalidProducerEpoch {
                got: 3,
                current: 4,
                ..
            })
        ),
        "{zombie:?}"
    );
    let old_marker = p.write_txn_marker(9, 3, true, 0).await;
    assert!(matches!(
        old_marker,
        Err(CoreError::InvalidProducerEpoch { .. })
    ));
    // The new epoch starts its sequence over.
    p.append(producer_batch(9, 4, 0, true, &["b"]), AckLevel::Leader)
        .await
        .expect("new epoch");
    assert_eq!(p.last_stable_offset(), 2);
}

#[tokio::test]
async fn a_marker_without_an_open_transaction_is_still_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = open(dir.path());
    let p = partition(&broker);
    assert_eq!(p.write_txn_marker(5, 0, true, 0).await.expect("marker"), 0);
    assert_eq!(p.write_txn_marker(5, 0, false, 0).await.expect("marker"), 1);
    assert_eq!(p.last_stable_offset(), 2);
    assert_eq!(
        p.aborted_transactions(0, 2),
        vec![AbortedTxn {
            producer_id: 5,
            first_offset: 1
        }]
    );
}

fn values(p: &Partition, from: i64) -> (Vec<String>, i64) {
    let read = p.records_from(from, 1 << 20).expect("read");
    let v = read
        .records
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect();
    (v, read.next_offset)
}

#[tokio::test]
async fn internal_readers_read_committed_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = open(dir.path());
    let p = partition(&broker);
    p.append(plain(&["a"]), AckLevel::Leader)
        .await
        .expect("append"); // 0
    p.append(
        producer_batch(1, 0, 0, true, &["aborted1"]),
        AckLevel::Leader,
    )
    .await
    .expect("append"); // 1
    p.append(producer_batch(2, 0, 0, true, &["kept"]), AckLevel::Leader)
        .await
        .expect("append"); // 2
    p.append(
        producer_batch(1, 0, 1, true, &["aborted2"]),
        AckLevel::Leader,
    )
    .await
    .expect("append"); // 3
    p.append(plain(&["b"]), AckLevel::Leader)
        .await
        .expect("append"); // 4
    assert_eq!(
        values(&p, 0),
        (vec!["a".to_string()], 1),
        "stops at the LSO"
    );
    p.write_txn_marker(1, 0, false, 0).await.expect("abort"); // 5
    assert_eq!(
        values(&p, 0),
        (vec!["a".to_string()], 2),
        "producer 2 still open"
    );
    p.write_txn_marker(2, 0, true, 0).await.expect("commit"); // 6
    let (v, next) = values(&p, 0);
    assert_eq!(v, vec!["a", "kept", "b"]);
    assert_eq!(next, 7);
    // From inside the aborted transaction too.
    assert_eq!(values(&p, 3).0, vec!["b"]);
    // A later transaction of the same producer is not covered by the old abort.
    p.append(producer_batch(1, 0, 2, true, &["later"]), AckLevel::Leader)
        .await
        .expect("append");
    p.write_txn_marker(1, 0, true, 0).await.expect("commit");
    assert_eq!(values(&p, 0).0, vec!["a", "kept", "b", "later"]);
}
