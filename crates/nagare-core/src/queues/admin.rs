//! What operators ask of queues (the HTTP admin API, `nagare queue`): every queue with
//! its depth, unacknowledged messages, consumers and redeliveries, and purging one.
//!
//! Every topic named `queue.<Q>` is queue `Q`, opened or not: a queue nobody used since
//! the start is described from the state replayed from the queue log, without opening
//! it (opening may trim its topic, which blocks).

use std::sync::Arc;

use super::{AckState, QueueStats, Queues, TOPIC_PREFIX};
use crate::{CoreError, Topic};

/// One queue as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueInfo {
    /// The STOMP name (`/queue/<name>`).
    pub name: String,
    /// The topic holding its messages (`queue.<name>`).
    pub topic: String,
    pub stats: QueueStats,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

/// Messages of `[start, end)` not acknowledged in `acks`.
fn unacked_between(acks: &AckState, start: i64, end: i64) -> u64 {
    let from = acks.floor.max(start);
    if from >= end {
        return 0;
    }
    let acked = acks.above.range(from..end).count() as i64;
    (end - from - acked).max(0) as u64
}

impl Queues {
    /// Every queue, by name.
    pub fn list(&self) -> Vec<QueueInfo> {
        let mut out: Vec<QueueInfo> = self
            .broker
            .list_topics()
            .iter()
            .filter_map(|t| self.info_of(t))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The queue `name` (its STOMP name), if its topic exists.
    pub fn info(&self, name: &str) -> Option<QueueInfo> {
        self.info_of(&self.broker.topic(&super::topic_for(name))?)
    }

    fn info_of(&self, topic: &Arc<Topic>) -> Option<QueueInfo> {
        let name = topic.name().strip_prefix(TOPIC_PREFIX)?;
        let p = topic.partition(0).ok()?;
        let (start, end) = (p.log_start_offset(), p.log_end_offset());
        let open = self.queues.lock().get(topic.name()).cloned();
        let stats = match open {
            Some(q) => q.stats(),
            None => QueueStats {
                depth: self
                    .replayed
                    .lock()
                    .get(topic.name())
                    .map_or((end - start).max(0) as u64, |a| {
                        unacked_between(a, start, end)
                    }),
                ..QueueStats::default()
            },
        };
        Some(QueueInfo {
            name: name.to_string(),
            topic: topic.name().to_string(),
            stats,
            log_start_offset: start,
            log_end_offset: end,
        })
    }

    /// Drops every message the queue `name` holds now (see [`super::Queue`]'s purge);
    /// returns how many. Stored in the queue log (fsynced) before it returns, so a
    /// restart does not bring them back; the topic is trimmed right after.
    pub async fn purge(self: &Arc<Self>, name: &str) -> Result<u64, CoreError> {
        if self.broker.cluster().is_some() {
            return Err(CoreError::ClusterMode("purging a queue"));
        }
        let topic = super::topic_for(name);
        if self.broker.topic(&topic).is_none() {
            return Err(CoreError::UnknownTopic(topic));
        }
        let queues = self.clone();
        let owned = name.to_string();
        // Opening a queue may trim its topic: blocking.
        let q = tokio::task::spawn_blocking(move || queues.queue(&owned))
            .await
            .map_err(|_| CoreError::ShuttingDown)??;
        let (purged, stored) = q.purge();
        stored.stored().await?;
        let _ = tokio::task::spawn_blocking(move || q.trim()).await;
        Ok(purged)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use nagare_log::batch::NewRecord;
    use parking_lot::Mutex;

    use super::*;
    use crate::queues::{Delivery, QueueSink};
    use crate::{AckLevel, Broker, BrokerConfig};

    #[derive(Default)]
    struct Hold(Mutex<Vec<i64>>);

    impl QueueSink for Hold {
        fn deliver(&self, d: Vec<Delivery>) -> bool {
            self.0.lock().extend(d.iter().map(|d| d.offset));
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

    fn recs(n: usize) -> Vec<NewRecord> {
        (0..n)
            .map(|i| NewRecord {
                value: Some(Bytes::from(format!("m{i}"))),
                ..NewRecord::default()
            })
            .collect()
    }

    #[test]
    fn unacked_counts_skip_acknowledged_offsets() {
        let acks = AckState {
            floor: 3,
            above: [5, 6, 20].into_iter().collect(),
            delivered: 0,
            ..AckState::default()
        };
        // 3..10 minus 5 and 6.
        assert_eq!(unacked_between(&acks, 0, 10), 5);
        assert_eq!(unacked_between(&acks, 4, 10), 4);
        assert_eq!(unacked_between(&acks, 0, 3), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stats_purge_and_restart() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (broker, queues) = open(dir.path());
            let q = queues.queue("work").unwrap();
            q.publish(&recs(5), AckLevel::Leader).await.unwrap();
            let hold = Arc::new(Hold::default());
            let c = q.subscribe(hold.clone(), 2);
            let info = queues.info("work").unwrap();
            assert_eq!(info.topic, "queue.work");
            assert_eq!(
                info.stats,
                QueueStats {
                    depth: 3,
                    unacked: 2,
                    consumers: 1,
                    redeliveries: 0
                }
            );
            // A NACK with requeue comes back flagged: one redelivery.
            assert!(q.nack(c, 0, false, true));
            assert_eq!(q.stats().redeliveries, 1);
            assert_eq!(queues.list().len(), 1);
            assert_eq!(queues.purge("work").await.unwrap(), 5);
            let s = q.stats();
            assert_eq!((s.depth, s.unacked, s.consumers), (0, 0, 1));
            // An ACK of a purged message is harmless.
            q.ack(c, 1, false);
            assert!(matches!(
                queues.purge("nope").await,
                Err(CoreError::UnknownTopic(_))
            ));
            queues.flush().await.unwrap();
            drop(queues);
            broker.shutdown().unwrap();
        }
        let (_broker, queues) = open(dir.path());
        // Described from the replayed state, without opening the queue.
        let info = queues.info("work").unwrap();
        assert_eq!(info.stats.depth, 0);
        assert_eq!(info.log_end_offset, 5);
        let q = queues.queue("work").unwrap();
        assert_eq!(q.stats().depth, 0);
        q.publish(&recs(2), AckLevel::Leader).await.unwrap();
        assert_eq!(queues.info("work").unwrap().stats.depth, 2);
    }
}
