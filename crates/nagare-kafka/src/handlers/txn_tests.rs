//! Transactions over the handlers, against a real broker on a temp dir: read-committed
//! Fetch (LSO, aborted transactions), DescribeProducers, and Produce refusing markers.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use nagare_core::log::batch::{build_batch, NewRecord};
use nagare_core::log::control::set_producer;
use nagare_core::AckLevel;
use nagare_core::Partition;

use super::str_bytes;
use super::test_support::{call_anonymous as call, state};
use crate::KafkaState;

fn batch(pid: Option<i64>, value: &str) -> BytesMut {
    let mut b = build_batch(&[NewRecord {
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        timestamp: 1,
        ..Default::default()
    }]);
    if let Some(pid) = pid {
        set_producer(&mut b, pid, 0, 0, true);
    }
    b
}

/// Partition 0 of topic `t`, created if need be.
fn partition_t(state: &KafkaState) -> Arc<Partition> {
    state
        .broker
        .topic_or_create("t")
        .expect("topic")
        .partition(0)
        .expect("p")
}

/// A Fetch of `t`-0 from offset 0 at `isolation` (1: read_committed), not waiting.
fn fetch_request(isolation: i8) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(isolation)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(str_bytes("t")))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])])
}

async fn fetch(state: &Arc<KafkaState>, isolation: i8) -> fetch_response::PartitionData {
    let r: FetchResponse = call(state, ApiKey::Fetch, 11, &fetch_request(isolation)).await;
    r.responses[0].partitions[0].clone()
}

fn batch_count(records: &Option<Bytes>) -> usize {
    records
        .as_ref()
        .and_then(|r| nagare_core::log::batch::split_batches(r).ok())
        .map_or(0, |v| v.len())
}

#[tokio::test]
async fn read_committed_fetch_stops_at_the_lso_and_lists_aborts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = state(dir.path());
    let p = partition_t(&state);
    p.append(batch(None, "a"), AckLevel::Leader)
        .await
        .expect("append"); // 0
    p.append(batch(Some(7), "t"), AckLevel::Leader)
        .await
        .expect("append"); // 1
    p.append(batch(None, "b"), AckLevel::Leader)
        .await
        .expect("append"); // 2

    let uncommitted = fetch(&state, 0).await;
    assert_eq!(uncommitted.high_watermark, 3);
    assert_eq!(uncommitted.last_stable_offset, 1);
    assert_eq!(batch_count(&uncommitted.records), 3);

    let committed = fetch(&state, 1).await;
    assert_eq!(committed.high_watermark, 3);
    assert_eq!(committed.last_stable_offset, 1);
    assert_eq!(batch_count(&committed.records), 1, "only below the LSO");
    assert_eq!(
        committed.aborted_transactions.as_deref().map(|a| a.len()),
        Some(0)
    );

    p.write_txn_marker(7, 0, false, 0).await.expect("abort"); // 3
    let committed = fetch(&state, 1).await;
    assert_eq!(committed.last_stable_offset, 4);
    assert_eq!(batch_count(&committed.records), 4, "data and the marker");
    let aborted: Vec<(i64, i64)> = committed
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    assert_eq!(aborted, vec![(7, 1)]);

    // DescribeProducers sees the producer, its marker's coordinator epoch, no open txn.
    p.append(batch(Some(8), "open"), AckLevel::Leader)
        .await
        .expect("append"); // 4
    let req = DescribeProducersRequest::default().with_topics(vec![
        describe_producers_request::TopicRequest::default()
            .with_name(TopicName(str_bytes("t")))
            .with_partition_indexes(vec![0, 5]),
    ]);
    let r: DescribeProducersResponse = call(&state, ApiKey::DescribeProducers, 0, &req).await;
    let parts = &r.topics[0].partitions;
    assert_eq!(parts[0].error_code, 0);
    assert_ne!(parts[1].error_code, 0, "no partition 5");
    let states: Vec<(i64, i64)> = parts[0]
        .active_producers
        .iter()
        .map(|s| (s.producer_id.0, s.current_txn_start_offset))
        .collect();
    assert_eq!(states, vec![(7, -1), (8, 4)]);
}

#[tokio::test]
async fn clients_cannot_produce_markers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = state(dir.path());
    state.broker.topic_or_create("t").expect("topic");
    let marker = nagare_core::log::control::build_control_batch(1, 0, true, 0, 0).freeze();
    let req = ProduceRequest::default().with_acks(1).with_topic_data(vec![
        produce_request::TopicProduceData::default()
            .with_name(TopicName(str_bytes("t")))
            .with_partition_data(vec![produce_request::PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(marker))]),
    ]);
    let r: ProduceResponse = call(&state, ApiKey::Produce, 9, &req).await;
    let code = r.responses[0].partition_responses[0].error_code;
    assert_eq!(code, kafka_protocol::ResponseError::InvalidRecord.code());
}

#[tokio::test]
async fn a_read_committed_long_poll_wakes_when_the_lso_moves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = state(dir.path());
    let p = partition_t(&state);
    p.append(batch(Some(3), "t"), AckLevel::Leader)
        .await
        .expect("append");
    let marker = {
        let p = p.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            p.write_txn_marker(3, 0, true, 0).await.expect("commit");
        })
    };
    let req = fetch_request(1).with_max_wait_ms(10_000).with_min_bytes(1);
    let started = std::time::Instant::now();
    let r: FetchResponse = call(&state, ApiKey::Fetch, 11, &req).await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "woken by the marker"
    );
    let part = &r.responses[0].partitions[0];
    assert_eq!(part.last_stable_offset, 2);
    assert_eq!(batch_count(&part.records), 2);
    marker.await.expect("marker task");
}
