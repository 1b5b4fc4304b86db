//! Persistent queues with competing consumers (what STOMP's `/queue/Q` needs), kept in the
//! log engine: the messages of queue `Q` are the records of topic `queue.<Q>` (one
//! partition, `Q` sanitized to a legal topic name; readable by Kafka consumers too), and
//! which of them are acknowledged is kept in the internal log `__nagare_queues-0` (keyed
//! by that topic name), replayed on start.
//!
//! Each queue has one shared cursor over its topic, a set of in-flight messages per
//! consumer bounded by the consumer's prefetch, and requeued messages that go out again
//! first, flagged as redelivered. Consumers are [`QueueSink`]s: the dispatcher hands them
//! messages without blocking and never more than their credit. No wire formats here.

mod persist;
mod queue;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use nagare_log::batch::NewRecord;
use parking_lot::Mutex;
use tokio::sync::Notify;

pub use queue::{ConsumerId, Delivery, Queue, QueueSink};

use crate::{AckLevel, Broker, CoreError, Partition};
use persist::StateOp;

/// The internal log holding acknowledgement state (`DATA/__nagare_queues-0`).
pub const STATE_LOG: &str = "queues";
/// How long the persister lets acknowledgements gather before one append.
const ACK_GATHER: std::time::Duration = std::time::Duration::from_millis(2);
/// Records written to the state log between two compactions.
const COMPACT_EVERY: usize = 20_000;
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
}

impl AckState {
    pub fn is_acked(&self, offset: i64) -> bool {
        offset < self.floor || self.above.contains(&offset)
    }

    pub fn ack(&mut self, offset: i64) {
        if offset < self.floor {
            return;
        }
        self.above.insert(offset);
        while self.above.remove(&self.floor) {
            self.floor += 1;
        }
    }
}

/// Every queue of a broker, and the writer of their acknowledgement state.
pub struct Queues {
    broker: Arc<Broker>,
    state_log: Arc<Partition>,
    queues: Mutex<HashMap<String, Arc<Queue>>>,
    /// State replayed from the internal log for queues not opened yet.
    replayed: Mutex<HashMap<String, AckState>>,
    /// Acknowledgements not yet written to the internal log, batched by the persister.
    pending: Mutex<Vec<(Arc<str>, i64)>>,
    /// Per queue, the delivered-up-to mark not yet written (only the latest counts).
    pending_delivered: Mutex<HashMap<Arc<str>, i64>>,
    wake: Notify,
}

impl Queues {
    /// Replays the acknowledgement log, rewrites it as one snapshot per queue (so it does
    /// not grow across restarts) and starts the background writer. Needs a tokio runtime.
    pub fn open(broker: Arc<Broker>) -> Result<Arc<Queues>, CoreError> {
        let state_log = broker.internal_log(STATE_LOG)?;
        let replayed = crate::blocking::off_runtime(|| replay(&state_log))?;
        let queues = Arc::new(Queues {
            broker,
            state_log,
            queues: Mutex::new(HashMap::new()),
            replayed: Mutex::new(replayed),
            pending: Mutex::new(Vec::new()),
            pending_delivered: Mutex::new(HashMap::new()),
            wake: Notify::new(),
        });
        crate::blocking::off_runtime(|| queues.compact())?;
        tokio::spawn(persister(Arc::downgrade(&queues)));
        Ok(queues)
    }

    /// The queue `name`, opened (and its topic created) on first use. Queues are known
    /// by their topic's name, so names that sanitize alike are one queue.
    pub fn queue(self: &Arc<Self>, name: &str) -> Result<Arc<Queue>, CoreError> {
        let topic_name = topic_for(name);
        let name = topic_name.as_str();
        if let Some(q) = self.queues.lock().get(name) {
            return Ok(q.clone());
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
        let q = Queue::new(name, partition, acks, Arc::downgrade(self));
        map.insert(name.to_string(), q.clone());
        Ok(q)
    }

    /// Writes every pending acknowledgement now (on shutdown).
    pub async fn flush(&self) -> Result<(), CoreError> {
        let records = self.take_pending();
        if !records.is_empty() {
            self.state_log
                .append_records(&records, AckLevel::Durable)
                .await?;
        }
        Ok(())
    }

    pub(crate) fn record_acks(&self, queue: &Arc<str>, offsets: &[i64]) {
        if offsets.is_empty() {
            return;
        }
        let mut p = self.pending.lock();
        p.extend(offsets.iter().map(|&o| (queue.clone(), o)));
        drop(p);
        self.wake.notify_one();
    }

    /// Notes that `queue` has delivered everything below `mark` at least once. Written
    /// with the next batch of acknowledgements (within milliseconds, to the page cache):
    /// cheap enough for every delivery, and what lets a restart flag in-flight messages
    /// as redelivered.
    pub(crate) fn record_delivered(&self, queue: &Arc<str>, mark: i64) {
        let mut p = self.pending_delivered.lock();
        let m = p.entry(queue.clone()).or_insert(mark);
        *m = (*m).max(mark);
        drop(p);
        self.wake.notify_one();
    }

    fn take_pending(&self) -> Vec<NewRecord> {
        let delivered = std::mem::take(&mut *self.pending_delivered.lock());
        let pending = std::mem::take(&mut *self.pending.lock());
        let mut by_queue: HashMap<Arc<str>, Vec<i64>> = HashMap::new();
        for (q, o) in pending {
            by_queue.entry(q).or_default().push(o);
        }
        let now = now_ms();
        // Marks first: a replay then never sees an acknowledgement of a message it does
        // not know was delivered.
        delivered
            .into_iter()
            .map(|(q, mark)| StateOp::Delivered(mark).to_record(&q, now))
            .chain(
                by_queue
                    .into_iter()
                    .map(|(q, offsets)| StateOp::Acked(offsets).to_record(&q, now)),
            )
            .collect()
    }

    /// Replaces the history in the state log with one snapshot per queue (at start, and
    /// by the persister every `COMPACT_EVERY` records). Blocking: it fsyncs.
    fn compact(&self) -> Result<(), CoreError> {
        let log = self.state_log.log();
        let start = log.log_start_offset();
        // Everything below `end` is reflected in the states collected next: an
        // acknowledgement updates its queue before it is queued for writing.
        let end = log.log_end_offset();
        if end - start < 2 {
            return Ok(());
        }
        let now = now_ms();
        let mut records: Vec<NewRecord> = self
            .replayed
            .lock()
            .iter()
            .map(|(q, s)| StateOp::Snapshot(s.clone()).to_record(q, now))
            .collect();
        let open: Vec<Arc<Queue>> = self.queues.lock().values().cloned().collect();
        for q in open {
            records.push(StateOp::Snapshot(q.ack_state()).to_record(q.name(), now));
        }
        if !records.is_empty() {
            let mut batch = nagare_log::batch::build_batch(&records);
            log.append(&mut batch)?;
            log.sync_to(log.log_end_offset())?;
        }
        log.delete_records_before(end)?;
        // Acknowledged messages are not needed any more either.
        for q in self.queues.lock().values() {
            q.trim();
        }
        Ok(())
    }
}

/// The topic holding queue `name`'s messages.
pub fn topic_for(name: &str) -> String {
    let mut t = String::from(TOPIC_PREFIX);
    t.push_str(&crate::sanitize_topic_name(name));
    t.truncate(249);
    t
}

fn replay(log: &Partition) -> Result<HashMap<String, AckState>, CoreError> {
    let mut states: HashMap<String, AckState> = HashMap::new();
    log.replay_records(|r| {
        if let Some((queue, op)) = StateOp::from_record(&r) {
            op.apply(states.entry(queue).or_default());
        }
        Ok(())
    })?;
    Ok(states)
}

/// Writes batched acknowledgements: one record per queue per round, one append per round.
async fn persister(queues: std::sync::Weak<Queues>) {
    let mut since_compaction = 0usize;
    loop {
        let Some(q) = queues.upgrade() else { return };
        let records = q.take_pending();
        if records.is_empty() {
            // Wake on new acknowledgements; re-check now and then so that dropping the
            // queues lets this task end.
            let woken =
                tokio::time::timeout(std::time::Duration::from_secs(1), q.wake.notified()).await;
            if woken.is_ok() {
                // Let acknowledgements gather: one append per few ms, not per message.
                tokio::time::sleep(ACK_GATHER).await;
            }
            continue;
        }
        since_compaction += records.len();
        if let Err(e) = q.state_log.append_records(&records, AckLevel::Leader).await {
            tracing::warn!(error = %e, "could not persist queue acknowledgements");
        }
        if since_compaction >= COMPACT_EVERY {
            since_compaction = 0;
            let q2 = q.clone();
            match tokio::task::spawn_blocking(move || q2.compact()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "queue state compaction failed"),
                Err(e) => tracing::warn!(error = %e, "queue state compaction panicked"),
            }
        }
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
