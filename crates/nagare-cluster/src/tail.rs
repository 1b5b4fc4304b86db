//! The tail reader: one consumer per gateway that follows the end of every partition
//! someone on this gateway reads (a STOMP `/topic` subscriber, the gateway's reply
//! topic), on a thread of its own. Each followed partition has one [`Follower`] that
//! receives its records in order: the partition's window, shared by every local reader
//! (so a hundred subscribers of a topic cost one read of it), or the reply inbox.
//!
//! A partition nobody has read for a while is no longer followed (checked every few
//! seconds), so a gateway reads only what its clients want.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use nagare_core::log::batch::Record;
use parking_lot::Mutex;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaResult;
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::context::Context;
use crate::error::ClusterError;
use crate::health::Health;

/// How often partitions nobody reads are let go.
const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// Records handled in one burst before followers are told (their watchers woken).
const BURST: usize = 2048;

/// Where the records of one followed partition go. Called on the tail's thread: must
/// not block.
pub(crate) trait Follower: Send + Sync {
    /// The partition's next record.
    fn push(&self, record: Record);
    /// The end of a burst of records: wake whoever waits for them.
    fn publish(&self);
    /// Whether the partition should still be followed.
    fn wanted(&self) -> bool;
}

type Followed = HashMap<String, HashMap<i32, Weak<dyn Follower>>>;

pub(crate) struct Tail {
    consumer: BaseConsumer<Context>,
    followed: Mutex<Followed>,
    stop: AtomicBool,
}

impl Tail {
    /// Starts the tail's thread.
    pub(crate) fn start(
        config: ClientConfig,
        health: &Arc<Health>,
    ) -> Result<Arc<Tail>, ClusterError> {
        let consumer = config.create_with_context(Context::new(health, "reader"))?;
        let tail = Arc::new(Tail {
            consumer,
            followed: Mutex::new(HashMap::new()),
            stop: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&tail);
        std::thread::Builder::new()
            .name("nagare-tail".into())
            .spawn(move || run(weak))?;
        Ok(tail)
    }

    /// Follows `topic`/`partition` from `from`, its records going to `who` (replacing
    /// whoever followed it before).
    pub(crate) fn follow(
        &self,
        topic: &str,
        partition: i32,
        from: i64,
        who: Weak<dyn Follower>,
    ) -> KafkaResult<()> {
        let mut followed = self.followed.lock();
        let known = followed
            .get(topic)
            .is_some_and(|p| p.contains_key(&partition));
        let mut tpl = TopicPartitionList::new();
        if known {
            tpl.add_partition(topic, partition);
            self.consumer.incremental_unassign(&tpl)?;
            tpl = TopicPartitionList::new();
        }
        tpl.add_partition_offset(topic, partition, Offset::Offset(from))?;
        self.consumer.incremental_assign(&tpl)?;
        followed
            .entry(topic.to_string())
            .or_default()
            .insert(partition, who);
        tracing::debug!(topic, partition, from, "following a partition");
        Ok(())
    }

    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Lets go of partitions whose follower is gone or no longer wants them.
    fn sweep(&self) {
        let mut followed = self.followed.lock();
        let mut tpl = TopicPartitionList::new();
        for (topic, partitions) in followed.iter_mut() {
            partitions.retain(|&p, who| {
                let keep = who.upgrade().is_some_and(|f| f.wanted());
                if !keep {
                    tpl.add_partition(topic, p);
                }
                keep
            });
        }
        followed.retain(|_, p| !p.is_empty());
        if tpl.count() > 0 {
            tracing::debug!(
                partitions = tpl.count(),
                "no longer following partitions nobody reads"
            );
            if let Err(e) = self.consumer.incremental_unassign(&tpl) {
                tracing::warn!(error = %e, "could not stop following partitions");
            }
        }
    }

    fn follower(&self, topic: &str, partition: i32) -> Option<Arc<dyn Follower>> {
        self.followed.lock().get(topic)?.get(&partition)?.upgrade()
    }
}

/// The tail's thread: poll, hand each record to its follower, wake them per burst.
fn run(tail: Weak<Tail>) {
    let mut last_sweep = Instant::now();
    let mut touched: Vec<Arc<dyn Follower>> = Vec::new();
    // The follower of the last record's partition: a burst is mostly one partition's.
    let mut last: Option<(String, i32, Arc<dyn Follower>)> = None;
    loop {
        let Some(tail) = tail.upgrade() else { return };
        if tail.stop.load(Ordering::SeqCst) {
            return;
        }
        let mut timeout = Duration::from_millis(200);
        for _ in 0..BURST {
            match tail.consumer.poll(timeout) {
                None => break,
                Some(Ok(m)) => {
                    let same =
                        matches!(&last, Some((t, p, _)) if t == m.topic() && *p == m.partition());
                    if !same {
                        last = tail
                            .follower(m.topic(), m.partition())
                            .map(|f| (m.topic().to_string(), m.partition(), f));
                    }
                    if let Some((_, _, f)) = &last {
                        f.push(record_of(&m));
                        if !touched.iter().any(|t| Arc::ptr_eq(t, f)) {
                            touched.push(f.clone());
                        }
                    }
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "tail reader");
                    break;
                }
            }
            timeout = Duration::ZERO;
        }
        for f in touched.drain(..) {
            f.publish();
        }
        // A follower replaced meanwhile is looked up again.
        last = None;
        if last_sweep.elapsed() >= SWEEP_EVERY {
            last_sweep = Instant::now();
            tail.sweep();
        }
    }
}

/// A consumed message as a record of the core.
pub(crate) fn record_of(m: &BorrowedMessage<'_>) -> Record {
    let headers = m
        .headers()
        .map(|h| {
            h.iter()
                .map(|h| (h.key.to_string(), h.value.map(Bytes::copy_from_slice)))
                .collect()
        })
        .unwrap_or_default();
    Record {
        offset: m.offset(),
        timestamp: m.timestamp().to_millis().unwrap_or(-1),
        key: m.key().map(Bytes::copy_from_slice),
        value: m.payload().map(Bytes::copy_from_slice),
        headers,
    }
}
