//! Queues over real logs in a temporary directory: competing consumers, prefetch,
//! cumulative and individual acks, requeue, and state surviving a restart.

use std::sync::Arc;

use bytes::Bytes;
use nagare_log::batch::NewRecord;
use parking_lot::Mutex;

use super::*;
use crate::internal_log::test_support;
use crate::{AckLevel, Broker, BrokerConfig};

#[derive(Default)]
struct Collect(Mutex<Vec<Delivery>>);

impl QueueSink for Collect {
    fn deliver(&self, d: Vec<Delivery>) -> bool {
        self.0.lock().extend(d);
        false
    }
}

impl Collect {
    fn take(&self) -> Vec<(String, bool)> {
        self.0
            .lock()
            .drain(..)
            .map(|d| {
                let v = d.record.value.as_deref().unwrap_or_default();
                (String::from_utf8_lossy(v).into_owned(), d.redelivered)
            })
            .collect()
    }
    fn offsets(&self) -> Vec<i64> {
        self.0.lock().iter().map(|d| d.offset).collect()
    }
}

fn rec(v: &str) -> NewRecord {
    NewRecord {
        value: Some(Bytes::copy_from_slice(v.as_bytes())),
        ..Default::default()
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

async fn publish(q: &Queue, values: &[&str]) {
    let recs: Vec<_> = values.iter().map(|v| rec(v)).collect();
    q.publish(&recs, AckLevel::Leader).await.unwrap();
}

#[tokio::test]
async fn competing_consumers_share_round_robin_within_prefetch() {
    let dir = tempfile::tempdir().unwrap();
    let (_b, queues) = open(dir.path());
    let q = queues.queue("work").unwrap();
    let (a, b) = (Arc::new(Collect::default()), Arc::new(Collect::default()));
    let ca = q.subscribe(a.clone(), 2);
    let _cb = q.subscribe(b.clone(), 2);
    publish(&q, &["1", "2", "3", "4", "5", "6"]).await;
    let got_a = a.take();
    let got_b = b.take();
    assert_eq!(got_a.len(), 2);
    assert_eq!(got_b.len(), 2);
    assert_eq!(q.depth(), (2, 4));
    // Acking frees credit: the rest goes out.
    q.ack(ca, 0, false);
    q.ack(ca, 2, false);
    assert_eq!(a.take().len(), 2);
}

#[tokio::test]
async fn cumulative_ack_and_requeue_redelivers_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let (_b, queues) = open(dir.path());
    let q = queues.queue("q").unwrap();
    let a = Arc::new(Collect::default());
    let ca = q.subscribe(a.clone(), 10);
    publish(&q, &["a", "b", "c"]).await;
    assert_eq!(a.offsets(), vec![0, 1, 2]);
    a.take();
    assert!(q.ack(ca, 1, true)); // settles 0 and 1
    assert!(!q.ack(ca, 0, false));
    assert!(q.nack(ca, 2, false, true));
    assert_eq!(a.take(), vec![("c".to_string(), true)]);
    q.unsubscribe(ca);
    let b = Arc::new(Collect::default());
    q.subscribe(b.clone(), 10);
    assert_eq!(b.take(), vec![("c".to_string(), true)]);
}

#[tokio::test]
async fn acknowledgements_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (broker, queues) = open(dir.path());
        let q = queues.queue("jobs").unwrap();
        publish(&q, &["1", "2", "3", "4"]).await;
        let a = Arc::new(Collect::default());
        let ca = q.subscribe(a.clone(), 10);
        q.ack(ca, 0, false);
        q.ack(ca, 2, false);
        queues.flush().await.unwrap();
        broker.shutdown().unwrap();
    }
    let (_broker, queues) = open(dir.path());
    let q = queues.queue("jobs").unwrap();
    let a = Arc::new(Collect::default());
    q.subscribe(a.clone(), 10);
    let vals: Vec<String> = a.take().into_iter().map(|(v, _)| v).collect();
    assert_eq!(vals, vec!["2", "4"]);
}

/// Messages delivered and not acknowledged when the broker dies come back flagged as
/// redelivered; messages never delivered before do not.
#[tokio::test]
async fn in_flight_messages_at_a_crash_are_redelivered_flagged() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (_broker, queues) = open(dir.path());
        let q = queues.queue("jobs").unwrap();
        publish(&q, &["1", "2", "3", "4", "5"]).await;
        let a = Arc::new(Collect::default());
        let ca = q.subscribe(a.clone(), 3);
        assert_eq!(a.take().len(), 3);
        q.ack(ca, 0, false);
        assert_eq!(a.take().len(), 1, "credit from the ack delivers one more");
        // Written with the acknowledgements, as the persister does within milliseconds.
        queues.flush().await.unwrap();
        // No shutdown, no unsubscribe: the process dies here.
    }
    let (_broker, queues) = open(dir.path());
    let q = queues.queue("jobs").unwrap();
    publish(&q, &["6"]).await;
    let a = Arc::new(Collect::default());
    q.subscribe(a.clone(), 10);
    assert_eq!(
        a.take(),
        vec![
            ("2".to_string(), true),
            ("3".to_string(), true),
            ("4".to_string(), true),
            ("5".to_string(), false),
            ("6".to_string(), false),
        ]
    );
}

#[test]
fn ack_state_floor_moves_over_contiguous_acks() {
    let mut s = AckState::default();
    s.ack(1);
    assert_eq!(s.floor, 0);
    s.ack(0);
    assert_eq!(s.floor, 2);
    assert!(s.is_acked(1) && !s.is_acked(2));
}

#[tokio::test]
async fn compaction_keeps_state_and_trims_acknowledged_messages() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (broker, queues) = open(dir.path());
        let q = queues.queue("c").unwrap();
        publish(&q, &["0", "1", "2", "3", "4", "5"]).await;
        let a = Arc::new(Collect::default());
        let ca = q.subscribe(a.clone(), 10);
        q.ack(ca, 1, false);
        queues.flush().await.unwrap();
        q.ack(ca, 0, false);
        queues.flush().await.unwrap();
        queues.trim_all();
        assert_eq!(
            q.partition().log_start_offset(),
            2,
            "acknowledged messages trimmed"
        );
        q.ack(ca, 4, false);
        queues.flush().await.unwrap();
        broker.shutdown().unwrap();
    }
    let (_broker, queues) = open(dir.path());
    let q = queues.queue("c").unwrap();
    let a = Arc::new(Collect::default());
    q.subscribe(a.clone(), 10);
    let vals: Vec<String> = a.take().into_iter().map(|(v, _)| v).collect();
    assert_eq!(vals, vec!["2", "3", "5"]);
}

/// A consumer that is done with every message as soon as it gets it (auto-ack written
/// at once): the queue keeps dispatching beyond the prefetch.
struct Instant(Mutex<Vec<i64>>);

impl QueueSink for Instant {
    fn deliver(&self, d: Vec<Delivery>) -> bool {
        self.0.lock().extend(d.iter().map(|d| d.offset));
        true
    }
}

#[tokio::test]
async fn consumers_settling_at_once_get_everything() {
    let dir = tempfile::tempdir().unwrap();
    let (_b, queues) = open(dir.path());
    let q = queues.queue("fast").unwrap();
    let a = Arc::new(Instant(Mutex::new(Vec::new())));
    q.subscribe(a.clone(), 2);
    let vals: Vec<String> = (0..50).map(|i| i.to_string()).collect();
    let refs: Vec<&str> = vals.iter().map(String::as_str).collect();
    publish(&q, &refs).await;
    assert_eq!(*a.0.lock(), (0..50).collect::<Vec<i64>>());
    assert_eq!(q.depth(), (0, 0));
}

/// The state log holds one record per queue once cleaned, and that is the whole state.
#[tokio::test]
async fn acknowledgements_survive_a_clean_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (broker, queues) = open(dir.path());
        let q = queues.queue("jobs").unwrap();
        publish(&q, &["1", "2", "3", "4", "5"]).await;
        let a = Arc::new(Collect::default());
        let ca = q.subscribe(a.clone(), 10);
        for o in [0, 2, 3] {
            q.ack(ca, o, false);
            // Separate appends, so the log holds history to clean.
            queues.flush().await.unwrap();
        }
        broker.shutdown().unwrap();
    }
    let broker = Broker::open(BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        ..BrokerConfig::default()
    })
    .unwrap();
    test_support::clean_now(&broker, STATE_LOG);
    assert_eq!(test_support::records(&broker, STATE_LOG).len(), 1);
    drop(broker);
    let (_broker, queues) = open(dir.path());
    let q = queues.queue("jobs").unwrap();
    let a = Arc::new(Collect::default());
    q.subscribe(a.clone(), 10);
    assert_eq!(
        a.take(),
        vec![("2".to_string(), true), ("5".to_string(), true)]
    );
}

/// Acknowledgement deltas of an earlier version replay, and the log is rewritten as one
/// state per queue before anything else is written.
#[tokio::test]
async fn a_log_of_acknowledgement_deltas_is_rewritten_as_states() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (broker, queues) = open(dir.path());
        let q = queues.queue("jobs").unwrap();
        publish(&q, &["1", "2", "3", "4", "5"]).await;
        broker.shutdown().unwrap();
    }
    {
        let broker = Broker::open(BrokerConfig {
            data_dir: dir.path().to_path_buf(),
            ..BrokerConfig::default()
        })
        .unwrap();
        let old = vec![
            test_support::raw("queue.jobs", Some(r#"{"acked":[[0,0]]}"#)),
            test_support::raw("queue.jobs", Some(r#"{"delivered":4}"#)),
            test_support::raw("queue.jobs", Some(r#"{"acked":[[2,3]]}"#)),
        ];
        test_support::append_raw(&broker, STATE_LOG, old);
        broker.shutdown().unwrap();
    }
    for round in 0..2 {
        let (broker, queues) = open(dir.path());
        let q = queues.queue("jobs").unwrap();
        let a = Arc::new(Collect::default());
        let c = q.subscribe(a.clone(), 10);
        // "5" was never delivered before the first round.
        assert_eq!(
            a.take(),
            vec![("2".to_string(), true), ("5".to_string(), round == 1)]
        );
        q.unsubscribe(c);
        queues.flush().await.unwrap();
        let p = broker.internal_log(STATE_LOG).unwrap();
        assert_eq!(p.log_start_offset(), 3, "the deltas are dropped");
        test_support::clean_now(&broker, STATE_LOG);
        broker.shutdown().unwrap();
    }
}
