//! The pull side of queues (share groups): acquisition, locks, delivery counts, the
//! delivery limit, and a STOMP-style consumer and a share member on one queue.

use std::sync::Arc;

use bytes::Bytes;
use nagare_log::batch::NewRecord;
use parking_lot::Mutex;

use super::*;
use crate::{AckLevel, Broker, BrokerConfig};

#[derive(Default)]
struct Collect(Mutex<Vec<Delivery>>);

impl QueueSink for Collect {
    fn deliver(&self, d: Vec<Delivery>) -> bool {
        self.0.lock().extend(d);
        false
    }
}

fn open(dir: &std::path::Path) -> (Arc<Broker>, Arc<Queues>) {
    let broker = Broker::open(BrokerConfig {
        data_dir: dir.to_path_buf(),
        ..BrokerConfig::default()
    })
    .unwrap();
    let (queues, background) = Queues::open(broker.clone()).unwrap();
    tokio::spawn(background.run());
    (broker, queues)
}

async fn publish(q: &Queue, n: usize) {
    let recs: Vec<_> = (0..n)
        .map(|i| NewRecord {
            value: Some(Bytes::from(i.to_string())),
            ..Default::default()
        })
        .collect();
    q.publish(&recs, AckLevel::Leader).await.unwrap();
}

fn offsets(a: &[Acquired]) -> Vec<i64> {
    a.iter().map(|a| a.offset).collect()
}

#[tokio::test]
async fn each_record_is_held_by_one_member_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let (_b, queues) = open(dir.path());
    let q = queues.queue("jobs").unwrap();
    publish(&q, 5).await;
    let a = q.acquire(1, 3, 0, 1000);
    let b = q.acquire(2, 10, 0, 1000);
    assert_eq!(offsets(&a), vec![0, 1, 2]);
    assert_eq!(offsets(&b), vec![3, 4]);
    assert!(a.iter().all(|r| r.delivery_count == 1));
    // Member 2 cannot settle member 1's records.
    assert!(!q.settle_acquired(2, 0, 0, &[Some(Settle::Accept)], 5, 0));
    assert!(q.settle_acquired(1, 0, 2, &[Some(Settle::Accept)], 5, 0));
    assert!(q.settle_acquired(2, 3, 4, &[Some(Settle::Accept)], 5, 0));
    assert_eq!(q.depth(), (0, 0));
    assert_eq!(q.start_offset(), 5);
}

#[tokio::test]
async fn release_and_lock_expiry_redeliver_with_a_higher_count_up_to_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (_b, queues) = open(dir.path());
    let q = queues.queue("retry").unwrap();
    publish(&q, 2).await;
    let first = q.acquire(1, 10, 0, 1000);
    assert_eq!(offsets(&first), vec![0, 1]);
    // Released one by one: offset 0 released, offset 1 rejected (archived).
    assert!(q.settle_acquired(
        1,
        0,
        1,
        &[Some(Settle::Release), Some(Settle::Reject)],
        3,
        0
    ));
    let again = q.acquire(2, 10, 10, 1000);
    assert_eq!(offsets(&again), vec![0]);
    assert_eq!(again[0].delivery_count, 2);
    // Its lock runs out: back again, third delivery.
    q.expire_leases(500, 3);
    assert!(q.acquire(3, 10, 600, 1000).is_empty(), "still locked");
    q.expire_leases(1010, 3);
    let third = q.acquire(3, 10, 1100, 1000);
    assert_eq!(third[0].delivery_count, 3);
    // At the limit, a release archives it.
    assert!(q.settle_acquired(3, 0, 0, &[Some(Settle::Release)], 3, 0));
    assert!(q.acquire(4, 10, 1200, 1000).is_empty());
    assert_eq!(q.start_offset(), 2);
}

#[tokio::test]
async fn a_stomp_consumer_and_a_share_member_compete_with_one_delivery_count() {
    let dir = tempfile::tempdir().unwrap();
    let (_b, queues) = open(dir.path());
    let q = queues.queue("both").unwrap();
    let stomp = Arc::new(Collect::default());
    let c = q.subscribe(stomp.clone(), 2);
    publish(&q, 4).await;
    let pushed: Vec<i64> = stomp.0.lock().iter().map(|d| d.offset).collect();
    assert_eq!(pushed, vec![0, 1]);
    let pulled = q.acquire(7, 10, 0, 1000);
    assert_eq!(offsets(&pulled), vec![2, 3]);
    // A STOMP NACK requeues: it goes out again (to the STOMP consumer, which has room)
    // as its second delivery.
    stomp.0.lock().clear();
    assert!(q.nack(c, 0, false, true));
    assert_eq!(q.delivery_count(0), 2);
    // A share RELEASE with the STOMP consumer full: the share member gets it back,
    // second delivery; once the STOMP consumer has room, a release goes to it.
    assert!(q.settle_acquired(7, 2, 2, &[Some(Settle::Release)], 5, 0));
    let again = q.acquire(8, 10, 0, 1000);
    assert_eq!(offsets(&again), vec![2]);
    assert_eq!(again[0].delivery_count, 2);
    assert!(q.ack(c, 1, false));
    stomp.0.lock().clear();
    assert!(q.settle_acquired(8, 2, 2, &[Some(Settle::Release)], 5, 0));
    let pushed: Vec<i64> = stomp.0.lock().iter().map(|d| d.offset).collect();
    assert_eq!(pushed, vec![2]);
    assert_eq!(q.delivery_count(2), 3);
}

#[tokio::test]
async fn a_share_queue_starts_latest_or_earliest_and_keeps_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, queues) = open(dir.path());
    let stomp_q = queues.queue("src").unwrap();
    publish(&stomp_q, 3).await;
    let latest = queues
        .share_queue("share/a/queue.src/0", "queue.src", 0, false)
        .unwrap();
    let earliest = queues
        .share_queue("share/b/queue.src/0", "queue.src", 0, true)
        .unwrap();
    assert!(latest.acquire(1, 10, 0, 1000).is_empty());
    assert_eq!(earliest.acquire(1, 10, 0, 1000).len(), 3);
    publish(&stomp_q, 2).await;
    assert_eq!(offsets(&latest.acquire(1, 10, 0, 1000)), vec![3, 4]);
    queues.flush().await.unwrap();
    drop((latest, earliest, stomp_q, queues));
    broker.shutdown().unwrap();
    let (_broker, queues) = open(dir.path());
    assert_eq!(queues.share_start("share/a/queue.src/0"), Some(3));
    queues
        .delete_share_queue("share/a/queue.src/0")
        .await
        .unwrap();
    assert_eq!(queues.share_start("share/a/queue.src/0"), None);
}

#[tokio::test]
async fn delivery_counts_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (broker, queues) = open(dir.path());
        let q = queues.queue("counted").unwrap();
        publish(&q, 2).await;
        assert_eq!(q.acquire(1, 10, 0, 1000).len(), 2);
        assert!(q.settle_acquired(1, 0, 1, &[Some(Settle::Release)], 9, 0));
        let again = q.acquire(1, 10, 0, 1000);
        assert_eq!(
            again.iter().map(|a| a.delivery_count).collect::<Vec<_>>(),
            vec![2, 2]
        );
        // Offset 1 is accepted: its count is forgotten with it.
        assert!(q.settle_acquired(1, 1, 1, &[Some(Settle::Accept)], 9, 0));
        queues.flush().await.unwrap();
        drop((q, queues));
        broker.shutdown().unwrap();
    }
    let (_broker, queues) = open(dir.path());
    let q = queues.queue("counted").unwrap();
    let after = q.acquire(1, 10, 0, 1000);
    assert_eq!(offsets(&after), vec![0]);
    assert_eq!(
        after[0].delivery_count, 3,
        "the two deliveries before the crash count"
    );
}

#[tokio::test]
async fn batch_optimized_acquisition_finishes_the_batch_it_reached() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, queues) = open(dir.path());
    let q = queues.queue("batches").unwrap();
    // Two batches of 5 (offsets 0-4, 5-9): published, and read back after a reopen.
    publish(&q, 5).await;
    publish(&q, 5).await;
    assert_eq!(
        offsets(&q.acquire_batches(1, 2, 0, 1000)),
        vec![0, 1, 2, 3, 4]
    );
    assert_eq!(
        offsets(&q.acquire(1, 2, 0, 1000)),
        vec![5, 6],
        "record limit is strict"
    );
    assert_eq!(offsets(&q.acquire_batches(1, 1, 0, 1000)), vec![7, 8, 9]);
    drop((q, queues));
    broker.shutdown().unwrap();
    drop(broker);
    let (_b, queues) = open(dir.path());
    let q = queues.queue("batches").unwrap();
    assert_eq!(
        offsets(&q.acquire_batches(1, 6, 0, 1000)),
        (0..10).collect::<Vec<_>>(),
        "batches read from the log end where they ended"
    );
}
