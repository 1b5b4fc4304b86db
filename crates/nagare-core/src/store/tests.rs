//! The broker in cluster mode over an in-memory cluster: topics learned and created
//! there, partitions and queues handing over to the remote side, the size limit and the
//! embedded-log-only operations refused.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use nagare_log::batch::{build_batch, NewRecord, Record};
use nagare_log::AppendInfo;
use parking_lot::Mutex;
use tokio::sync::watch;

use super::*;
use crate::queues::{Delivery, Queues};
use crate::{AckLevel, Broker, BrokerConfig, TopicConfig};

#[derive(Default)]
struct MemoryCluster {
    topics: Mutex<BTreeMap<String, u32>>,
    logs: Mutex<BTreeMap<(String, i32), Arc<MemoryLog>>>,
    creates: AtomicUsize,
    settled: Arc<Mutex<Vec<(i64, bool, Settlement)>>>,
}

struct MemoryLog {
    records: Mutex<Vec<NewRecord>>,
    end: watch::Sender<i64>,
}

impl RemoteLog for MemoryLog {
    fn append<'a>(
        &'a self,
        records: &'a [NewRecord],
    ) -> BoxFuture<'a, Result<AppendInfo, CoreError>> {
        Box::pin(async move {
            let mut all = self.records.lock();
            let base = all.len() as i64;
            all.extend(records.iter().cloned());
            self.end.send_replace(all.len() as i64);
            Ok(AppendInfo {
                base_offset: base,
                last_offset: all.len() as i64 - 1,
                max_timestamp: -1,
                record_count: records.len() as u32,
            })
        })
    }

    fn read(&self, offset: i64, max_bytes: u64) -> BoxFuture<'_, Result<RecordsRead, CoreError>> {
        let read = self.read_window(offset, max_bytes);
        Box::pin(async move { Ok(read) })
    }

    fn read_window(&self, offset: i64, _max_bytes: u64) -> RecordsRead {
        let all = self.records.lock();
        let records: Vec<Record> = all
            .iter()
            .enumerate()
            .skip(offset.max(0) as usize)
            .map(|(i, r)| Record {
                offset: i as i64,
                timestamp: r.timestamp,
                key: r.key.clone(),
                value: r.value.clone(),
                headers: r.headers.clone(),
            })
            .collect();
        RecordsRead {
            next_offset: offset.max(all.len() as i64),
            batch_ends: records.iter().map(|r| r.offset).collect(),
            records,
        }
    }

    fn bounds(&self) -> BoxFuture<'_, Result<Bounds, CoreError>> {
        let b = self.cached_bounds();
        Box::pin(async move { Ok(b) })
    }

    fn cached_bounds(&self) -> Bounds {
        Bounds {
            start: 0,
            end: self.records.lock().len() as i64,
        }
    }

    fn watch(&self) -> watch::Receiver<i64> {
        self.end.subscribe()
    }
}

struct MemoryQueue {
    settled: Arc<Mutex<Vec<(i64, bool, Settlement)>>>,
}

impl RemoteQueue for MemoryQueue {
    fn subscribe(&self, sink: Arc<dyn QueueSink>, _prefetch: usize) -> ConsumerId {
        sink.deliver(vec![Delivery {
            consumer: 7,
            offset: 41,
            record: Arc::new(Record {
                offset: 0,
                timestamp: 0,
                key: None,
                value: None,
                headers: vec![],
            }),
            redelivered: false,
            delivery_count: 1,
        }]);
        7
    }
    fn unsubscribe(&self, _consumer: ConsumerId) {}
    fn settle(&self, _c: ConsumerId, tag: i64, cumulative: bool, how: Settlement) -> bool {
        self.settled.lock().push((tag, cumulative, how));
        true
    }
    fn accept_many(&self, _c: ConsumerId, tags: &[i64]) {
        for &t in tags {
            self.settled.lock().push((t, false, Settlement::Accept));
        }
    }
    fn stats(&self) -> QueueStats {
        QueueStats::default()
    }
}

struct NoReplies;

impl ReplyRouter for NoReplies {
    fn id_prefix(&self) -> &str {
        "n1."
    }
    fn is_elsewhere(&self, id: &str) -> bool {
        !id.starts_with("n1.")
    }
    fn send<'a>(&'a self, _replies: &'a [Reply]) -> BoxFuture<'a, Result<(), CoreError>> {
        Box::pin(async { Ok(()) })
    }
    fn set_inbox(&self, _inbox: Arc<dyn ReplyInbox>) {}
}

impl ClusterCatalog for MemoryCluster {
    fn location(&self) -> String {
        "kafka://memory:1".into()
    }
    fn readiness(&self) -> Readiness {
        Readiness::Ready
    }
    fn list_topics(&self) -> Result<Vec<RemoteTopic>, CoreError> {
        Ok(self
            .topics
            .lock()
            .iter()
            .map(|(name, &partitions)| RemoteTopic {
                name: name.clone(),
                partitions,
            })
            .collect())
    }
    fn describe_topic(&self, name: &str) -> Result<Option<RemoteTopic>, CoreError> {
        Ok(self.topics.lock().get(name).map(|&partitions| RemoteTopic {
            name: name.to_string(),
            partitions,
        }))
    }
    fn create_topic(
        &self,
        name: &str,
        partitions: u32,
        _c: &[(String, String)],
    ) -> Result<(), CoreError> {
        self.creates.fetch_add(1, Ordering::SeqCst);
        let mut topics = self.topics.lock();
        if topics.contains_key(name) {
            return Err(CoreError::TopicExists(name.to_string()));
        }
        topics.insert(name.to_string(), partitions);
        Ok(())
    }
    fn delete_topic(&self, name: &str) -> Result<(), CoreError> {
        self.topics.lock().remove(name);
        Ok(())
    }
    fn create_partitions(&self, name: &str, total: u32) -> Result<(), CoreError> {
        self.topics.lock().insert(name.to_string(), total);
        Ok(())
    }
    fn log(&self, topic: &str, partition: i32) -> Arc<dyn RemoteLog> {
        self.logs
            .lock()
            .entry((topic.to_string(), partition))
            .or_insert_with(|| {
                Arc::new(MemoryLog {
                    records: Mutex::new(Vec::new()),
                    end: watch::channel(0).0,
                })
            })
            .clone()
    }
    fn queue(&self, _name: &str, _topic: &str) -> Arc<dyn RemoteQueue> {
        Arc::new(MemoryQueue {
            settled: self.settled.clone(),
        })
    }
    fn replies(&self) -> Arc<dyn ReplyRouter> {
        Arc::new(NoReplies)
    }
}

fn gateway(cluster: &Arc<MemoryCluster>) -> (tempfile::TempDir, Arc<Broker>) {
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        default_partitions: 2,
        ..BrokerConfig::default()
    };
    let broker = Broker::open_cluster(config, cluster.clone()).unwrap();
    (dir, broker)
}

fn rec(value: &str) -> NewRecord {
    NewRecord {
        value: Some(Bytes::from(value.to_string())),
        ..NewRecord::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_the_clusters_and_appends_go_there() {
    let cluster = Arc::new(MemoryCluster::default());
    let (_a_dir, a) = gateway(&cluster);
    let (_b_dir, b) = gateway(&cluster);
    let t = a.topic_or_create("events").unwrap();
    assert_eq!(t.partition_count(), 2);
    // The other gateway learns it; nobody creates it twice.
    assert_eq!(b.topic_or_create("events").unwrap().partition_count(), 2);
    assert_eq!(cluster.creates.load(Ordering::SeqCst), 1);

    let p = t.partition(1).unwrap();
    assert!(p.is_remote() && !p.needs_sync(AckLevel::Durable));
    let info = p
        .append_records(&[rec("a"), rec("b")], AckLevel::Leader)
        .await
        .unwrap();
    assert_eq!((info.base_offset, info.last_offset), (0, 1));
    let info = p
        .append(build_batch(&[rec("c")]), AckLevel::None)
        .await
        .unwrap();
    assert_eq!(info.base_offset, 2);
    p.sync_to(info.last_offset + 1).await.unwrap();
    // Read back through the other gateway's partition of the same topic.
    let q = b.partition("events", 1).unwrap();
    q.prepare_read().await.unwrap();
    assert_eq!(q.log_end_offset(), 3);
    let read = q.read_records(1, 1 << 20).await.unwrap();
    let values: Vec<_> = read
        .records
        .iter()
        .map(|r| r.value.clone().unwrap())
        .collect();
    assert_eq!(values, ["b", "c"]);

    // The same size limit as the embedded log's.
    let big = NewRecord {
        value: Some(Bytes::from(vec![0u8; 2 << 20])),
        ..NewRecord::default()
    };
    assert!(matches!(
        p.append_records(&[big], AckLevel::Leader).await,
        Err(CoreError::MessageTooLarge { .. })
    ));
    // What only the embedded log has is refused, naming cluster mode.
    assert!(matches!(p.read(0, 100), Err(CoreError::ClusterMode(_))));
    assert!(matches!(
        p.delete_records_before(1),
        Err(CoreError::ClusterMode(_))
    ));
    assert!(matches!(
        a.update_topic_config("events", TopicConfig::default()),
        Err(CoreError::ClusterMode(_))
    ));
}

#[test]
fn the_topic_list_follows_the_cluster() {
    let cluster = Arc::new(MemoryCluster::default());
    let (_dir, a) = gateway(&cluster);
    cluster.create_topic("made-by-kafka", 3, &[]).unwrap();
    a.sync_cluster_topics().unwrap();
    assert_eq!(a.topic("made-by-kafka").unwrap().partition_count(), 3);
    cluster.create_partitions("made-by-kafka", 5).unwrap();
    a.sync_cluster_topics().unwrap();
    assert_eq!(a.topic("made-by-kafka").unwrap().partition_count(), 5);
    cluster.delete_topic("made-by-kafka").unwrap();
    a.sync_cluster_topics().unwrap();
    assert!(a.topic("made-by-kafka").is_none());
    // Created through the gateway with the requested partitions.
    a.create_topic("mine", Some(4), TopicConfig::default())
        .unwrap();
    assert_eq!(cluster.topics.lock().get("mine"), Some(&4));
    a.delete_topic("mine").unwrap();
    assert!(cluster.topics.lock().is_empty());
}

#[derive(Default)]
struct Hold(Mutex<Vec<i64>>);

impl QueueSink for Hold {
    fn deliver(&self, d: Vec<Delivery>) -> bool {
        self.0.lock().extend(d.iter().map(|d| d.offset));
        false
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_are_kept_by_the_cluster() {
    let cluster = Arc::new(MemoryCluster::default());
    let (_dir, a) = gateway(&cluster);
    let (queues, _background) = Queues::open(a.clone()).unwrap();
    let q = queues.queue("work").unwrap();
    assert!(q.is_remote());
    // One partition, whatever the default.
    assert_eq!(cluster.topics.lock().get("queue.work"), Some(&1));
    q.publish(&[rec("job")], AckLevel::Durable).await.unwrap();
    assert_eq!(cluster.log("queue.work", 0).cached_bounds().end, 1);
    let sink = Arc::new(Hold::default());
    let c = q.subscribe(sink.clone(), 10);
    assert_eq!(*sink.0.lock(), [41]);
    assert!(q.ack(c, 41, true));
    assert!(q.nack(c, 41, false, true));
    assert!(q.nack(c, 41, false, false));
    q.ack_many(c, &[42]);
    assert_eq!(
        *cluster.settled.lock(),
        [
            (41, true, Settlement::Accept),
            (41, false, Settlement::Release),
            (41, false, Settlement::Reject),
            (42, false, Settlement::Accept)
        ]
    );
    assert!(matches!(
        queues.purge("work").await,
        Err(CoreError::ClusterMode(_))
    ));
    assert!(a
        .reply_router()
        .is_some_and(|r| r.is_elsewhere("n2.tmp.1.0.ff")));
}
