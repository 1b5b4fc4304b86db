//! Persistent queues with competing consumers (what STOMP's `/queue/Q` needs), kept in the
//! log engine: the messages of queue `Q` are the records of topic `queue.<Q>` (one
//! partition, `Q` sanitized to a legal topic name; readable by Kafka consumers too), and
//! which of them are acknowledged (and up to where they were delivered) is kept in the
//! internal log `__nagare_queues-0` (keyed by that topic name), an
//! [`InternalLog`](crate::internal_log::InternalLog) replayed on open.
//!
//! Each queue has one shared cursor over its topic, a set of in-flight messages per
//! consumer bounded by the consumer's prefetch, and requeued messages that go out again
//! first, flagged as redelivered. Consumers are [`QueueSink`]s: the dispatcher hands them
//! messages without blocking and never more than their credit. No wire formats here.

mod admin;
mod persist;
mod queue;
mod share;
#[cfg(test)]
mod share_tests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

pub use admin::QueueInfo;
pub use queue::{ConsumerId, Delivery, Queue, QueueSink, QueueStats};
pub use share::{Acquired, Holder, Lease, Settle};

use crate::internal_log::{InternalLog, InternalLogWriter, Ticket};
use crate::{Broker, CoreError};
use persist::{Change, QueueOp};

/// The internal log holding acknowledgement state (`DATA/__nagare_queues-0`).
pub const STATE_LOG: &str = "queues";
/// How often records appended to a queue's topic by others are looked for.
const EXTERNAL_POLL: std::time::Duration = std::time::Duration::from_millis(50);
/// Acknowledged messages are trimmed from queue topics every this many polls (10 s).
const TRIM_EVERY_POLLS: u64 = 200;
/// Topics backing queues are named `queue.<sanitized queue name>`.
pub const TOPIC_PREFIX: &str = "queue.";

/// Acknowledgement state of one queue: everything below `floor` is acknowledged, and so
/// is every offset in `above`. Every offset below `delivered` has been handed to a
/// consumer at least once, so after a restart an unacknowledged one there goes out
/// again flagged as redelivered (it may have been processed before the crash).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AckState {
    pub floor: i64,
    pub above: BTreeSet<i64>,
    pub delivered: i64,
    /// Delivery counts above 1 of messages not yet acknowledged (redelivered ones), so
    /// a restart keeps counting toward a share group's delivery limit.
    pub counts: BTreeMap<i64, i16>,
}

impl AckState {
    pub(crate) fn is_acked(&self, offset: i64) -> bool {
        offset < self.floor || self.above.contains(&offset)
    }

    pub(crate) fn ack(&mut self, offset: i64) {
        if offset < self.floor {
            return;
        }
        if offset == self.floor {
            // In order, the common case: no trip through `above`.
            self.floor += 1;
        } else {
            self.above.insert(offset);
        }
        while !self.above.is_empty() && self.above.remove(&self.floor) {
            self.floor += 1;
        }
        if !self.counts.is_empty() {
            self.counts.remove(&offset);
            // Counts below the floor are of acknowledged messages; usually there are none,
            // so this costs a peek rather than rebuilding the map each time.
            while self
                .counts
                .first_key_value()
                .is_some_and(|(&o, _)| o < self.floor)
            {
                self.counts.pop_first();
            }
        }
    }
}

/// Every queue of a broker, and the log of their acknowledgement state.
pub struct Queues {
    broker: Arc<Broker>,
    state_log: Arc<InternalLog<QueueOp>>,
    queues: Mutex<HashMap<String, Arc<Queue>>>,
    /// State replayed from the internal log for queues not opened yet.
    replayed: Mutex<HashMap<String, AckState>>,
}

/// What [`Queues`] runs in the background: the state log's writer, the poll for records
/// other front ends appended to queue topics, and the trimming of acknowledged messages.
/// Ends when the [`Queues`] is dropped.
#[must_use = "queue state is not stored until the background task runs"]
pub struct QueuesBackground {
    queues: Weak<Queues>,
    writer: InternalLogWriter<QueueOp>,
}

impl Queues {
    /// Replays the acknowledgement log. Blocking. The returned background task must be
    /// run (on the runtime) for acknowledgements to be stored.
    pub fn open(broker: Arc<Broker>) -> Result<(Arc<Queues>, QueuesBackground), CoreError> {
        let (state_log, replayed, writer) = InternalLog::<QueueOp>::open(&broker, STATE_LOG)?;
        let queues = Arc::new(Queues {
            broker,
            state_log,
            queues: Mutex::new(HashMap::new()),
            replayed: Mutex::new(replayed),
        });
        let background = QueuesBackground {
            queues: Arc::downgrade(&queues),
            writer,
        };
        Ok((queues, background))
    }

    /// The queue `name`, opened (and its topic created) on first use. Queues are known
    /// by their topic's name, so names that sanitize alike are one queue. Blocking the
    /// first time (creates the topic).
    pub fn queue(self: &Arc<Self>, name: &str) -> Result<Arc<Queue>, CoreError> {
        let topic_name = topic_for(name);
        let name = topic_name.as_str();
        if let Some(q) = self.queues.lock().get(name) {
            return Ok(q.clone());
        }
        if let Some(cluster) = self.broker.cluster() {
            return self.cluster_queue(cluster, name);
        }
        let topic = match self.broker.topic(&topic_name) {
            Some(t) => t,
            None => {
                let config = crate::TopicConfig {
                    // Unacknowledged messages must not expire; acknowledged ones are
                    // dropped by the queue itself.
                    retention_ms: -1,
                    ..self.broker.config().topic_defaults.clone()
                };
                match self.broker.create_topic(&topic_name, Some(1), config) {
                    Ok(t) => t,
                    Err(CoreError::TopicExists(_)) => self
                        .broker
                        .topic(&topic_name)
                        .ok_or(CoreError::UnknownTopic(topic_name.clone()))?,
                    Err(e) => return Err(e),
                }
            }
        };
        let partition = topic.partition(0)?;
        let mut map = self.queues.lock();
        if let Some(q) = map.get(name) {
            return Ok(q.clone());
        }
        let acks = self.replayed.lock().remove(name).unwrap_or_default();
        let q = Queue::new(name, partition, acks, Arc::downgrade(self), true);
        map.insert(name.to_string(), q.clone());
        Ok(q)
    }

    /// Cluster mode: the queue `name` is the cluster's share group of that name over the
    /// queue's topic, created (with the cluster's default settings and one partition)
    /// on first use. Blocking the first time.
    fn cluster_queue(
        self: &Arc<Self>,
        cluster: &Arc<dyn crate::store::ClusterCatalog>,
        topic_name: &str,
    ) -> Result<Arc<Queue>, CoreError> {
        let topic = match self.broker.topic_or_learn(topic_name)? {
            Some(t) => t,
            None => {
                let config = crate::TopicConfig {
                    overrides: Default::default(),
                    ..self.broker.topic_defaults()
                };
                match self.broker.create_topic(topic_name, Some(1), config) {
                    Ok(t) => t,
                    Err(CoreError::TopicExists(_)) => match self.broker.topic(topic_name) {
                        Some(t) => t,
                        None => crate::blocking::off_runtime(|| {
                            self.broker.learn_created_topic(cluster, topic_name)
                        })?,
                    },
                    Err(e) => return Err(e),
                }
            }
        };
        let partition = topic.partition(0)?;
        let mut map = self.queues.lock();
        if let Some(q) = map.get(topic_name) {
            return Ok(q.clone());
        }
        let group = topic_name.strip_prefix(TOPIC_PREFIX).unwrap_or(topic_name);
        let q = Queue::remote(topic_name, partition, cluster.queue(group, topic_name));
        map.insert(topic_name.to_string(), q.clone());
        Ok(q)
    }

    /// The queue a share group keeps over partition `partition` of an ordinary topic,
    /// opened on first use and known in the queue log as `key`. A new one starts at the
    /// log end (`earliest` false, Kafka's `share.auto.offset.reset=latest`) or at the log
    /// start, and that start is stored at once so a restart does not move it. Unlike a
    /// STOMP queue it never trims the topic, which belongs to others. Blocking the first
    /// time (reads the partition's offsets).
    pub fn share_queue(
        self: &Arc<Self>,
        key: &str,
        topic: &str,
        partition: i32,
        earliest: bool,
    ) -> Result<Arc<Queue>, CoreError> {
        if let Some(q) = self.queues.lock().get(key) {
            return Ok(q.clone());
        }
        let t = self
            .broker
            .topic(topic)
            .ok_or_else(|| CoreError::UnknownTopic(topic.to_string()))?;
        let partition = t.partition(partition)?;
        let mut map = self.queues.lock();
        if let Some(q) = map.get(key) {
            return Ok(q.clone());
        }
        let replayed = self.replayed.lock().remove(key);
        let fresh = replayed.is_none();
        let acks = replayed.unwrap_or_else(|| {
            let start = if earliest {
                partition.log_start_offset()
            } else {
                partition.log_end_offset()
            };
            AckState {
                floor: start,
                above: BTreeSet::new(),
                delivered: start,
                counts: BTreeMap::new(),
            }
        });
        let q = Queue::new(key, partition, acks.clone(), Arc::downgrade(self), false);
        if fresh {
            drop(self.record_snapshot(&q.name().into(), &acks));
        }
        map.insert(key.to_string(), q.clone());
        Ok(q)
    }

    /// Moves a share group's start offset on `key` (AlterShareGroupOffsets): everything
    /// below `offset` counts as settled, nothing at or above it as delivered. Stored
    /// durably before it returns. The queue must have no member holding messages.
    pub async fn reset_share_queue(&self, key: &str, offset: i64) -> Result<(), CoreError> {
        let state = AckState {
            floor: offset,
            above: BTreeSet::new(),
            delivered: offset,
            counts: BTreeMap::new(),
        };
        let open = self.queues.lock().remove(key);
        if let Some(q) = open {
            drop(q);
        }
        self.replayed.lock().insert(key.to_string(), state.clone());
        self.record_snapshot(&key.into(), &state).stored().await
    }

    /// The stored start offset of a share queue not opened yet (DescribeShareGroupOffsets).
    pub fn share_start(&self, key: &str) -> Option<i64> {
        if let Some(q) = self.queues.lock().get(key) {
            return Some(q.start_offset());
        }
        self.replayed.lock().get(key).map(|a| a.floor)
    }

    /// Every share queue whose key starts with `prefix`, with its start offset.
    pub fn share_keys(&self, prefix: &str) -> Vec<(String, i64)> {
        let mut out: Vec<(String, i64)> = self
            .queues
            .lock()
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, q)| (k.clone(), q.start_offset()))
            .collect();
        out.extend(
            self.replayed
                .lock()
                .iter()
                .filter(|(k, _)| k.starts_with(prefix))
                .map(|(k, a)| (k.clone(), a.floor)),
        );
        out.sort();
        out.dedup_by(|a, b| a.0 == b.0);
        out
    }

    /// Forgets a share queue (DeleteShareGroupOffsets, DeleteGroups).
    pub async fn delete_share_queue(&self, key: &str) -> Result<(), CoreError> {
        self.queues.lock().remove(key);
        self.replayed.lock().remove(key);
        self.state_log
            .push(
                [QueueOp {
                    queue: key.to_string(),
                    change: Change::Deleted,
                }],
                true,
            )
            .stored()
            .await
    }

    /// Waits until every acknowledgement so far is stored and fsynced (on shutdown).
    pub async fn flush(&self) -> Result<(), CoreError> {
        self.state_log.flush().await
    }

    /// Stores newly acknowledged offsets of `queue` (fire and forget: a lost
    /// acknowledgement means a redelivery, never a loss). Cheap: the log's writer turns
    /// the changes of one append into one record of the queue's whole state.
    pub(crate) fn record_acks(&self, queue: &Arc<str>, offsets: &[i64]) {
        if offsets.is_empty() {
            return;
        }
        let op = QueueOp {
            queue: queue.to_string(),
            change: Change::Acked(offsets.to_vec()),
        };
        self.state_log.push_detached([op]);
    }

    /// What one dispatch round changed: the delivered mark (if it moved) and the
    /// messages settled at once (auto-ack), pushed together, in that order.
    pub(crate) fn record_round(&self, queue: &Arc<str>, delivered: Option<i64>, acked: &[i64]) {
        let delivered = delivered.map(|mark| QueueOp {
            queue: queue.to_string(),
            change: Change::Delivered(mark),
        });
        let acked = (!acked.is_empty()).then(|| QueueOp {
            queue: queue.to_string(),
            change: Change::Acked(acked.to_vec()),
        });
        if delivered.is_some() || acked.is_some() {
            self.state_log
                .push_detached(delivered.into_iter().chain(acked));
        }
    }

    /// Notes that `queue` has delivered everything below `mark` at least once: cheap
    /// enough for every dispatch round (written with the acknowledgements, to the page
    /// cache), and what lets a restart flag in-flight messages as redelivered.
    pub(crate) fn record_delivered(&self, queue: &Arc<str>, mark: i64) {
        let op = QueueOp {
            queue: queue.to_string(),
            change: Change::Delivered(mark),
        };
        self.state_log.push_detached([op]);
    }

    /// Stores delivery counts above 1 (redeliveries: rare, so cheap enough to write each).
    pub(crate) fn record_counts(&self, queue: &Arc<str>, counts: Vec<(i64, i16)>) {
        if counts.is_empty() {
            return;
        }
        let op = QueueOp {
            queue: queue.to_string(),
            change: Change::Counts(counts),
        };
        self.state_log.push_detached([op]);
    }

    /// Writes a queue's whole state (after a purge), durably: the returned ticket
    /// resolves once it is fsynced.
    pub(crate) fn record_snapshot(&self, queue: &Arc<str>, state: &AckState) -> Ticket {
        let op = QueueOp {
            queue: queue.to_string(),
            change: Change::Whole(state.clone()),
        };
        self.state_log.push([op], true)
    }

    fn open_queues(&self) -> Vec<Arc<Queue>> {
        self.queues.lock().values().cloned().collect()
    }

    /// Drops acknowledged messages from the front of every open queue's topic. Blocking
    /// (removes segment files).
    pub(crate) fn trim_all(&self) {
        for q in self.open_queues() {
            q.trim();
        }
    }
}

impl QueuesBackground {
    /// Runs until the [`Queues`] is dropped.
    pub async fn run(self) {
        let poll = async {
            let mut tick = tokio::time::interval(EXTERNAL_POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut rounds = 0u64;
            loop {
                tick.tick().await;
                let Some(queues) = self.queues.upgrade() else {
                    return;
                };
                // Records appended by other front ends (a Kafka producer writing to the
                // topic) are picked up by a slow poll: watching every append would wake
                // a task per message on the hot path, where `publish` already dispatches.
                for q in queues.open_queues() {
                    q.pump_if_behind();
                }
                rounds += 1;
                if rounds.is_multiple_of(TRIM_EVERY_POLLS) {
                    let _ = tokio::task::spawn_blocking(move || queues.trim_all()).await;
                }
            }
        };
        tokio::join!(self.writer.run(), poll);
    }
}

/// The topic holding queue `name`'s messages.
pub fn topic_for(name: &str) -> String {
    let mut t = String::from(TOPIC_PREFIX);
    t.push_str(&crate::sanitize_topic_name(name));
    t.truncate(249);
    t
}
