//! The append path's turn-waiting variant through a real broker: appends started in one
//! turn keep their order, and one cancelled while it waits in the queue is still
//! appended.

use std::future::Future;
use std::sync::Arc;

use nagare_log::batch::{build_batch, NewRecord};

use super::*;
use crate::{Broker, BrokerConfig, TopicConfig};

fn partition(dir: &std::path::Path) -> (Arc<Broker>, Arc<Partition>) {
    let broker = Broker::open(BrokerConfig {
        data_dir: dir.to_path_buf(),
        ..BrokerConfig::default()
    })
    .expect("broker opens");
    broker
        .create_topic("t", Some(1), TopicConfig::default())
        .expect("topic created");
    let p = broker.partition("t", 0).expect("partition");
    (broker, p)
}

fn batch() -> BytesMut {
    build_batch(&[NewRecord::default()])
}

fn base_offsets(answers: Vec<Answer>) -> Vec<i64> {
    answers
        .into_iter()
        .map(|a| a.expect("appended").base_offset)
        .collect()
}

#[tokio::test]
async fn appends_started_in_one_turn_keep_their_order() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, p) = partition(dir.path());
    let (a, b, c) = tokio::join!(
        p.append_batches_together(vec![batch()], AckLevel::Leader),
        p.append_batches_together(vec![batch(), batch()], AckLevel::Durable),
        p.append_batches(vec![batch()], AckLevel::Leader),
    );
    assert_eq!(base_offsets(a), vec![0]);
    assert_eq!(base_offsets(b), vec![1, 2]);
    assert_eq!(base_offsets(c), vec![3]);
    assert_eq!(p.log_end_offset(), 4);
}

#[tokio::test]
async fn a_cancelled_append_waiting_for_its_turn_is_still_appended() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, p) = partition(dir.path());
    let mut append = Box::pin(p.append_batches_together(vec![batch()], AckLevel::Leader));
    // Queued, then waiting for its turn.
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(append.as_mut().poll(&mut cx).is_pending());
    assert_eq!(p.log_end_offset(), 0);
    drop(append);
    assert_eq!(p.log_end_offset(), 1);
}
