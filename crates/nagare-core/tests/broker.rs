//! The broker over real logs in a temporary directory.

use std::time::Duration;

use bytes::Bytes;
use nagare_core::log::batch::NewRecord;
use nagare_core::{AckLevel, Broker, BrokerConfig, CoreError, TopicConfig, TopicFlush};

fn config(dir: &std::path::Path) -> BrokerConfig {
    BrokerConfig {
        data_dir: dir.to_path_buf(),
        ..BrokerConfig::default()
    }
}

fn record(value: &str) -> NewRecord {
    NewRecord {
        key: Some(Bytes::from_static(b"k")),
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: vec![("h".to_string(), Some(Bytes::from_static(b"v")))],
        timestamp: 1_700_000_000_000,
    }
}

fn values(broker: &Broker, topic: &str, partition: i32) -> Vec<String> {
    let p = broker.partition(topic, partition).unwrap();
    p.records_from(p.log_start_offset(), u64::MAX >> 1)
        .unwrap()
        .records
        .into_iter()
        .map(|r| String::from_utf8(r.value.unwrap().to_vec()).unwrap())
        .collect()
}

#[tokio::test]
async fn topics_and_records_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (id, cluster) = {
        let broker = Broker::open(config(dir.path())).unwrap();
        let topic = broker
            .create_topic("orders", Some(3), TopicConfig::default())
            .unwrap();
        let p = topic.partition(2).unwrap();
        let info = p
            .append_records(&[record("a"), record("b")], AckLevel::Durable)
            .await
            .unwrap();
        assert_eq!((info.base_offset, info.last_offset), (0, 1));
        p.append_records(&[record("c")], AckLevel::Leader)
            .await
            .unwrap();
        let out = (topic.id(), broker.cluster_id().to_string());
        broker.shutdown().unwrap();
        out
    };
    let broker = Broker::open(config(dir.path())).unwrap();
    let topic = broker.topic("orders").expect("topic is back");
    assert_eq!(topic.id(), id);
    assert_eq!(broker.cluster_id(), cluster);
    assert_eq!(topic.partition_count(), 3);
    assert_eq!(values(&broker, "orders", 2), ["a", "b", "c"]);
    assert_eq!(broker.partition("orders", 2).unwrap().log_end_offset(), 3);
    assert!(dir.path().join("orders-2").is_dir());
}

#[tokio::test]
async fn auto_creation_follows_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    let t = broker.topic_or_create("fresh").unwrap();
    assert_eq!(t.partition_count(), 1);
    assert!(broker.topic_or_create("bad/name").is_err());

    let dir2 = tempfile::tempdir().unwrap();
    let strict = Broker::open(BrokerConfig {
        auto_create_topics: false,
        ..config(dir2.path())
    })
    .unwrap();
    assert!(matches!(
        strict.topic_or_create("fresh"),
        Err(CoreError::UnknownTopic(_))
    ));
}

#[tokio::test]
async fn create_delete_and_grow() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    broker
        .create_topic("t", Some(1), TopicConfig::default())
        .unwrap();
    assert!(matches!(
        broker.create_topic("t", Some(1), TopicConfig::default()),
        Err(CoreError::TopicExists(_))
    ));
    assert!(matches!(
        broker.create_topic("z", Some(0), TopicConfig::default()),
        Err(CoreError::InvalidPartitions(0))
    ));
    broker.create_partitions("t", 4, false).unwrap();
    assert_eq!(broker.topic("t").unwrap().partition_count(), 4);
    assert!(broker.create_partitions("t", 2, false).is_err());
    broker.delete_topic("t").unwrap();
    assert!(broker.topic("t").is_none());
    assert!(!dir.path().join("t-0").exists());
    assert!(broker.list_topics().is_empty());
    broker.shutdown().unwrap();
    let again = Broker::open(config(dir.path())).unwrap();
    assert!(again.topic("t").is_none());
}

#[tokio::test]
async fn readers_are_woken_by_appends() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    let p = broker.topic_or_create("w").unwrap().partition(0).unwrap();
    assert!(!p.wait_beyond(0, Duration::from_millis(20)).await);
    let waiter = {
        let p = p.clone();
        tokio::spawn(async move { p.wait_beyond(0, Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    p.append_records(&[record("x"), record("y")], AckLevel::Leader)
        .await
        .unwrap();
    assert!(waiter.await.unwrap());
}

#[tokio::test]
async fn oversized_batches_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    let mut cfg = TopicConfig::default();
    cfg.set("max.message.bytes", "200").unwrap();
    let t = broker.create_topic("small", Some(1), cfg).unwrap();
    let big = NewRecord {
        value: Some(Bytes::from(vec![7u8; 500])),
        ..record("")
    };
    let err = t
        .partition(0)
        .unwrap()
        .append_records(&[big], AckLevel::Leader)
        .await
        .unwrap_err();
    assert!(matches!(err, CoreError::MessageTooLarge { .. }));
    assert_eq!(t.partition(0).unwrap().log_end_offset(), 0);
}

#[tokio::test]
async fn sync_policy_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    let mk = |name: &str, flush: TopicFlush| {
        let cfg = TopicConfig {
            flush,
            ..TopicConfig::default()
        };
        broker
            .create_topic(name, Some(1), cfg)
            .unwrap()
            .partition(0)
            .unwrap()
    };
    let acks = mk("acks", TopicFlush::Acks);
    assert!(acks.needs_sync(AckLevel::Durable));
    assert!(!acks.needs_sync(AckLevel::Leader));
    let never = mk("never", TopicFlush::Never);
    assert!(!never.needs_sync(AckLevel::Durable));
    let always = mk("always", TopicFlush::Always);
    assert!(always.needs_sync(AckLevel::Leader));
    assert!(!always.needs_sync(AckLevel::None));
    let info = always
        .append_records(&[record("d")], AckLevel::Leader)
        .await
        .unwrap();
    assert!(always.flushed_offset() > info.last_offset);
}

#[tokio::test]
async fn internal_logs_are_not_topics() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    let log = broker.internal_log("offsets").unwrap();
    log.append_records(&[record("o")], AckLevel::Durable)
        .await
        .unwrap();
    assert!(broker.list_topics().is_empty());
    assert!(std::sync::Arc::ptr_eq(
        &log,
        &broker.internal_log("offsets").unwrap()
    ));
    assert!(dir.path().join("__nagare_offsets-0").is_dir());
    assert!(broker
        .create_topic("__nagare_x", None, TopicConfig::default())
        .is_err());
    // Kafka's internal topic names are not ordinary topics either.
    for name in ["__consumer_offsets", "__transaction_state"] {
        assert!(broker
            .create_topic(name, None, TopicConfig::default())
            .is_err());
    }
    assert!(broker
        .create_topic("__my_own", None, TopicConfig::default())
        .is_ok());
}

/// A creation that fails part-way (here: a file sits where partition 3's directory
/// goes) removes every directory it made and leaves the registry as it was; so does a
/// CreatePartitions that fails part-way.
#[test]
fn failed_creation_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let broker = Broker::open(config(data)).unwrap();
    std::fs::write(data.join("t-3"), b"not a partition").unwrap();
    assert!(broker
        .create_topic("t", Some(6), TopicConfig::default())
        .is_err());
    assert!(broker.topic("t").is_none());
    for i in [0, 1, 2, 4, 5] {
        assert!(!data.join(format!("t-{i}")).exists(), "t-{i} left behind");
    }
    assert!(data.join("t-3").is_file(), "what was there before stays");

    std::fs::remove_file(data.join("t-3")).unwrap();
    broker
        .create_topic("t", Some(2), TopicConfig::default())
        .unwrap();
    std::fs::write(data.join("t-4"), b"in the way").unwrap();
    assert!(broker.create_partitions("t", 6, false).is_err());
    assert_eq!(broker.topic("t").unwrap().partition_count(), 2);
    assert!(!data.join("t-2").exists() && !data.join("t-3").exists());
    broker.shutdown().unwrap();
    drop(broker);

    let broker = Broker::open(config(data)).unwrap();
    assert_eq!(broker.topic("t").unwrap().partition_count(), 2);
}
