//! One queue: the shared cursor over its topic, read-ahead and requeued messages, the
//! consumers with their in-flight messages, and the dispatch loop (`pump`).
//!
//! In cluster mode the queue is kept by the cluster instead (a [`RemoteQueue`]): every
//! public method hands over to it, and the local state below stays empty.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Weak};

use nagare_log::batch::{build_batch, NewRecord, Record};
use nagare_log::AppendInfo;
use parking_lot::Mutex;

use super::{AckState, Queues};
use crate::store::{RemoteQueue, Settlement};
use crate::{AckLevel, CoreError, Partition};

/// Bytes read from the queue's topic per refill.
const READ_BYTES: u64 = 256 * 1024;
/// Records kept from `publish` without reading them back, at most.
const READ_AHEAD: usize = 4096;

pub type ConsumerId = u64;

/// A message handed to a consumer.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub consumer: ConsumerId,
    pub offset: i64,
    pub record: Arc<Record>,
    pub redelivered: bool,
    /// How many times the message was handed out, this time included (STOMP and share
    /// group deliveries alike; Kafka's `deliveryCount`).
    pub delivery_count: i16,
}

/// Where a consumer's messages go. `deliver` gets every message one dispatch round hands
/// this consumer, in order (so they can be written together). It is called with the queue
/// locked: it must not block and must not call back into the queue. It returns true when
/// the consumer is already done with them (auto-ack, written at once): they are settled
/// right away.
pub trait QueueSink: Send + Sync {
    fn deliver(&self, deliveries: Vec<Delivery>) -> bool;
}

struct Consumer {
    id: ConsumerId,
    sink: Arc<dyn QueueSink>,
    prefetch: usize,
    /// Offsets delivered and not yet settled, in delivery order (for cumulative acks).
    delivered: VecDeque<i64>,
}

/// Per-message state keyed by offset. Every message a queue hands out passes through
/// several of these maps, so they use a fast hasher rather than SipHash: offsets are not
/// chosen by clients, so there is no hash flooding to defend against.
pub(super) type OffsetMap<V> = HashMap<i64, V, foldhash::fast::RandomState>;

pub(super) struct State {
    /// Next offset of the topic to read into `ready`.
    pub(super) next_read: i64,
    /// Read or requeued, not yet delivered, by offset (requeued ones go first because
    /// they are older); the flag says whether it was delivered before.
    pub(super) ready: BTreeMap<i64, (Arc<Record>, bool)>,
    pub(super) in_flight: OffsetMap<Arc<Record>>,
    consumers: Vec<Consumer>,
    /// Round-robin position in `consumers`.
    turn: usize,
    next_consumer: ConsumerId,
    pub(super) acks: AckState,
    /// Messages handed out again (after a NACK, a consumer leaving, or a restart) since
    /// the queue was opened: what an operator watches for poison messages.
    redeliveries: u64,
    /// How many times each unsettled message was handed out (STOMP deliveries and share
    /// acquisitions alike: the count is the queue's, not the protocol's).
    pub(super) counts: OffsetMap<i16>,
    /// Messages acquired by share-group members (pull), with their acquisition locks.
    pub(super) leases: OffsetMap<super::share::Lease>,
    /// Last offsets of the record batches read into `ready` (pruned as they are handed
    /// out): where a batch-optimized share fetch may stop.
    pub(super) batch_ends: BTreeSet<i64>,
}

/// What an operator sees of a queue (the HTTP admin API, `nagare queue`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Messages waiting for a consumer (not delivered, or requeued).
    pub depth: u64,
    /// Messages delivered and not yet acknowledged.
    pub unacked: u64,
    pub consumers: u64,
    pub redeliveries: u64,
}

pub struct Queue {
    name: Arc<str>,
    partition: Arc<Partition>,
    pub(super) state: Mutex<State>,
    queues: Weak<Queues>,
    /// Whether the topic is this queue's own (`queue.<Q>`), so acknowledged messages may
    /// be trimmed from it; a share group over an ordinary topic must leave it alone.
    owns_topic: bool,
    /// Wakes share fetches waiting for messages (new, released or expired ones).
    pub(super) available: tokio::sync::Notify,
    /// Cluster mode: the cluster's queue, which every method below hands over to.
    remote: Option<Arc<dyn RemoteQueue>>,
}

impl Queue {
    pub(crate) fn new(
        name: &str,
        partition: Arc<Partition>,
        acks: AckState,
        queues: Weak<Queues>,
        owns_topic: bool,
    ) -> Arc<Queue> {
        let q = Arc::new(Self::build(name, partition, acks, queues, owns_topic, None));
        q.trim();
        q
    }

    /// The queue `name` kept by the cluster (cluster mode), its messages in `partition`'s
    /// topic.
    pub(crate) fn remote(
        name: &str,
        partition: Arc<Partition>,
        remote: Arc<dyn RemoteQueue>,
    ) -> Arc<Queue> {
        Arc::new(Self::build(
            name,
            partition,
            AckState::default(),
            Weak::new(),
            false,
            Some(remote),
        ))
    }

    fn build(
        name: &str,
        partition: Arc<Partition>,
        acks: AckState,
        queues: Weak<Queues>,
        owns_topic: bool,
        remote: Option<Arc<dyn RemoteQueue>>,
    ) -> Queue {
        Queue {
            name: name.into(),
            state: Mutex::new(State {
                next_read: acks.floor.max(partition.log_start_offset()),
                ready: BTreeMap::new(),
                in_flight: OffsetMap::default(),
                consumers: Vec::new(),
                turn: 0,
                next_consumer: 1,
                counts: acks.counts.iter().map(|(&o, &c)| (o, c)).collect(),
                acks,
                redeliveries: 0,
                leases: OffsetMap::default(),
                batch_ends: BTreeSet::new(),
            }),
            partition,
            queues,
            owns_topic,
            available: tokio::sync::Notify::new(),
            remote,
        }
    }

    /// Drops acknowledged messages from the front of the queue's topic.
    pub(crate) fn trim(&self) {
        if !self.owns_topic {
            return;
        }
        let floor = self.state.lock().acks.floor;
        let p = &self.partition;
        if floor > p.log_start_offset() && floor <= p.log_end_offset() {
            // Removes segment files: blocking.
            let Some(log) = p.log() else { return };
            if let Err(e) = crate::blocking::off_runtime(|| log.delete_records_before(floor)) {
                tracing::warn!(queue = %self.name, error = %e, "could not trim acknowledged messages");
            }
        }
    }

    /// Whether the cluster keeps this queue (cluster mode).
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn partition(&self) -> &Arc<Partition> {
        &self.partition
    }

    /// Appends messages and dispatches them. Returns once they are as durable as `ack`
    /// and the topic's flush policy require.
    pub async fn publish(
        &self,
        records: &[NewRecord],
        ack: AckLevel,
    ) -> Result<AppendInfo, CoreError> {
        self.publish_owned(records.to_vec(), ack).await
    }

    /// [`Queue::publish`] taking the records: the ones handed to consumers straight away
    /// are moved into the queue rather than copied (their headers are a few allocations
    /// each, on every message of the RPC path).
    pub async fn publish_owned(
        &self,
        records: Vec<NewRecord>,
        ack: AckLevel,
    ) -> Result<AppendInfo, CoreError> {
        if self.remote.is_some() {
            // Acknowledged by the cluster (acks=all) whatever `ack` asks; the cluster
            // hands the messages to the queue's consumers.
            return self.partition.append_records(&records, ack).await;
        }
        let info = self
            .partition
            .append(build_batch(&records), AckLevel::Leader)
            .await?;
        {
            let mut st = self.state.lock();
            // Fast path: the records just appended are next in line; skip reading them back.
            if st.next_read == info.base_offset && st.ready.len() < READ_AHEAD {
                for (i, r) in records.into_iter().enumerate() {
                    let offset = info.base_offset + i as i64;
                    let record = Record {
                        offset,
                        timestamp: r.timestamp,
                        key: r.key,
                        value: r.value,
                        headers: r.headers,
                    };
                    let again = offset < st.acks.delivered;
                    st.ready.insert(offset, (Arc::new(record), again));
                }
                st.next_read = info.last_offset + 1;
                st.batch_ends.insert(info.last_offset);
            }
            self.pump_locked(&mut st);
        }
        self.partition
            .wait_durable(info.last_offset + 1, ack)
            .await?;
        Ok(info)
    }

    /// Adds a consumer that may hold up to `prefetch` unsettled messages.
    pub fn subscribe(&self, sink: Arc<dyn QueueSink>, prefetch: usize) -> ConsumerId {
        if let Some(r) = &self.remote {
            return r.subscribe(sink, prefetch);
        }
        let mut st = self.state.lock();
        let id = st.next_consumer;
        st.next_consumer += 1;
        st.consumers.push(Consumer {
            id,
            sink,
            prefetch: prefetch.max(1),
            delivered: VecDeque::new(),
        });
        self.pump_locked(&mut st);
        id
    }

    /// Removes a consumer; its unsettled messages go back to the queue as redelivered.
    pub fn unsubscribe(&self, consumer: ConsumerId) {
        if let Some(r) = &self.remote {
            return r.unsubscribe(consumer);
        }
        let mut st = self.state.lock();
        let Some(i) = st.consumers.iter().position(|c| c.id == consumer) else {
            return;
        };
        let c = st.consumers.remove(i);
        for offset in c.delivered {
            if let Some(record) = st.in_flight.remove(&offset) {
                st.ready.insert(offset, (record, true));
            }
        }
        self.pump_locked(&mut st);
    }

    /// Settles `offset` (and with `cumulative`, everything delivered to this consumer
    /// before it). Returns false if the message is not in flight for this consumer.
    pub fn ack(&self, consumer: ConsumerId, offset: i64, cumulative: bool) -> bool {
        if let Some(r) = &self.remote {
            return r.settle(consumer, offset, cumulative, Settlement::Accept);
        }
        self.settle(consumer, offset, cumulative, false)
    }

    /// Like `ack`, but `requeue` puts the messages back (flagged redelivered) instead of
    /// dropping them.
    pub fn nack(&self, consumer: ConsumerId, offset: i64, cumulative: bool, requeue: bool) -> bool {
        if let Some(r) = &self.remote {
            let how = if requeue {
                Settlement::Release
            } else {
                Settlement::Reject
            };
            return r.settle(consumer, offset, cumulative, how);
        }
        self.settle(consumer, offset, cumulative, requeue)
    }

    /// Acknowledges many single messages of one consumer with one lock (auto-ack mode).
    pub fn ack_many(&self, consumer: ConsumerId, offsets: &[i64]) {
        if let Some(r) = &self.remote {
            return r.accept_many(consumer, offsets);
        }
        let mut st = self.state.lock();
        let mut acked = Vec::with_capacity(offsets.len());
        if let Some(c) = st.consumers.iter_mut().find(|c| c.id == consumer) {
            for o in offsets {
                if let Some(pos) = c.delivered.iter().position(|d| d == o) {
                    c.delivered.remove(pos);
                }
            }
        }
        for &o in offsets {
            if st.in_flight.remove(&o).is_some() {
                acked.push(o);
            }
        }
        self.mark_acked(&mut st, &acked);
        self.pump_locked(&mut st);
    }

    fn settle(&self, consumer: ConsumerId, offset: i64, cumulative: bool, requeue: bool) -> bool {
        let mut st = self.state.lock();
        let Some(c) = st.consumers.iter_mut().find(|c| c.id == consumer) else {
            return false;
        };
        let Some(pos) = c.delivered.iter().position(|&d| d == offset) else {
            return false;
        };
        let settled: Vec<i64> = if cumulative {
            c.delivered.drain(..=pos).collect()
        } else {
            c.delivered.remove(pos).into_iter().collect()
        };
        let mut acked = Vec::new();
        for o in settled {
            if let Some(record) = st.in_flight.remove(&o) {
                if requeue {
                    st.ready.insert(o, (record, true));
                } else {
                    acked.push(o);
                }
            }
        }
        self.mark_acked(&mut st, &acked);
        self.pump_locked(&mut st);
        true
    }

    /// Messages waiting (read or not yet read) and in flight, for tests and metrics.
    pub fn depth(&self) -> (u64, usize) {
        if let Some(r) = &self.remote {
            let s = r.stats();
            return (s.depth, s.unacked as usize);
        }
        let st = self.state.lock();
        let unread = (self.partition.log_end_offset() - st.next_read).max(0) as u64;
        (unread + st.ready.len() as u64, st.in_flight.len())
    }

    /// Depth, unacknowledged messages, consumers and redeliveries, for operators.
    pub fn stats(&self) -> QueueStats {
        if let Some(r) = &self.remote {
            return r.stats();
        }
        let (depth, unacked) = self.depth();
        let st = self.state.lock();
        QueueStats {
            depth,
            unacked: unacked as u64,
            consumers: st.consumers.len() as u64,
            redeliveries: st.redeliveries,
        }
    }

    /// Drops every message stored so far, delivered-but-unacknowledged ones included
    /// (their later ACKs are ignored and they are not redelivered): everything below the
    /// log end counts as acknowledged. Returns how many messages were dropped and the
    /// ticket of the new state in the queue log; the caller trims the topic once it is
    /// stored. Messages published afterwards are delivered as usual.
    pub(crate) fn purge(&self) -> (u64, crate::internal_log::Ticket) {
        let mut st = self.state.lock();
        let end = self.partition.log_end_offset();
        let from = st.acks.floor.max(self.partition.log_start_offset());
        let acked_between = st.acks.above.range(from..end).count() as i64;
        let purged = (end - from - acked_between).max(0) as u64;
        let above = st.acks.above.split_off(&end);
        let counts = st.acks.counts.split_off(&end);
        st.acks = AckState {
            floor: st.acks.floor.max(end),
            above,
            delivered: st.acks.delivered.max(end),
            counts,
        };
        st.ready = st.ready.split_off(&end);
        st.in_flight.retain(|&o, _| o >= end);
        st.counts.retain(|&o, _| o >= end);
        st.leases.retain(|&o, _| o >= end);
        st.next_read = st.next_read.max(end);
        let ticket = match self.queues.upgrade() {
            Some(q) => q.record_snapshot(&self.name, &st.acks),
            None => crate::internal_log::Ticket::ready(),
        };
        (purged, ticket)
    }

    /// Dispatches records others appended to the queue's topic, if there are any and
    /// someone to take them (the queues' background poll).
    pub(crate) fn pump_if_behind(&self) {
        if self.remote.is_some() {
            return;
        }
        let end = self.partition.log_end_offset();
        let (behind, consumers) = {
            let st = self.state.lock();
            (end > st.next_read, !st.consumers.is_empty())
        };
        if behind && consumers {
            self.pump();
        }
        if behind {
            // Share fetches waiting on this queue read the new records themselves.
            self.available.notify_waiters();
        }
    }

    /// Dispatches what can be dispatched now.
    pub fn pump(&self) {
        let mut st = self.state.lock();
        self.pump_locked(&mut st);
    }

    pub(super) fn mark_acked(&self, st: &mut State, offsets: &[i64]) {
        if offsets.is_empty() {
            return;
        }
        for &o in offsets {
            st.acks.ack(o);
            st.counts.remove(&o);
        }
        if let Some(q) = self.queues.upgrade() {
            q.record_acks(&self.name, offsets);
        }
    }

    pub(super) fn pump_locked(&self, st: &mut State) {
        // Rounds go on while consumers settle at once (auto-ack) and so regain credit.
        while self.pump_round(st) {}
        if !st.ready.is_empty() {
            // What STOMP consumers had no room for is there for share fetches.
            self.available.notify_waiters();
        }
    }

    /// One dispatch round; true if messages were settled at once (credit came back).
    fn pump_round(&self, st: &mut State) -> bool {
        // Messages of this round per consumer index, handed over together at the end.
        let mut rounds: Vec<Vec<Delivery>> = Vec::new();
        let mut recounted = Vec::new();
        loop {
            if st.consumers.is_empty() {
                break;
            }
            // The next consumer with room, round robin.
            let n = st.consumers.len();
            let Some(k) = (0..n)
                .map(|i| (st.turn + i) % n)
                .find(|&i| st.consumers[i].delivered.len() < st.consumers[i].prefetch)
            else {
                break;
            };
            if st.ready.is_empty() && !self.refill(st) {
                break;
            }
            let Some((offset, (record, redelivered))) = st.ready.pop_first() else {
                break;
            };
            st.turn = (k + 1) % n;
            if redelivered {
                st.redeliveries += 1;
            }
            let count = st.counts.entry(offset).or_insert(i16::from(redelivered));
            *count = count.saturating_add(1);
            let delivery_count = *count;
            if delivery_count >= 2 {
                recounted.push((offset, delivery_count));
            }
            let c = &mut st.consumers[k];
            c.delivered.push_back(offset);
            let consumer = c.id;
            st.in_flight.insert(offset, record.clone());
            if rounds.len() < n {
                rounds.resize_with(n, Vec::new);
            }
            rounds[k].push(Delivery {
                consumer,
                offset,
                record,
                redelivered,
                delivery_count,
            });
        }
        let mark = rounds
            .iter()
            .flatten()
            .map(|d| d.offset + 1)
            .max()
            .unwrap_or(0);
        // Stored with this round's settlements below: one push to the queue log.
        let delivered = (mark > st.acks.delivered).then(|| {
            st.acks.delivered = mark;
            mark
        });
        self.note_counts(recounted);
        let mut settled = Vec::new();
        for (k, batch) in rounds.into_iter().enumerate() {
            if batch.is_empty() {
                continue;
            }
            let count = batch.len();
            let sink = st.consumers[k].sink.clone();
            if sink.deliver(batch) {
                // Done already: these were the last `count` delivered to this consumer.
                let c = &mut st.consumers[k];
                let from = c.delivered.len() - count;
                settled.extend(c.delivered.drain(from..));
            }
        }
        for &o in &settled {
            st.in_flight.remove(&o);
            st.acks.ack(o);
            st.counts.remove(&o);
        }
        if let Some(q) = self.queues.upgrade() {
            q.record_round(&self.name, delivered, &settled);
        }
        !settled.is_empty()
    }

    /// Stores delivery counts above 1 (see [`AckState::counts`]).
    pub(super) fn note_counts(&self, counts: Vec<(i64, i16)>) {
        if counts.is_empty() {
            return;
        }
        if let Some(q) = self.queues.upgrade() {
            q.record_counts(&self.name, counts);
        }
    }

    /// Notes that everything below `mark` has been handed out at least once.
    pub(super) fn note_delivered(&self, st: &mut State, mark: i64) {
        if mark > st.acks.delivered {
            st.acks.delivered = mark;
            if let Some(q) = self.queues.upgrade() {
                q.record_delivered(&self.name, mark);
            }
        }
    }

    /// Reads the next records of the topic into `ready`; false if there are none.
    pub(super) fn refill(&self, st: &mut State) -> bool {
        let end = self.partition.log_end_offset();
        let mut gaps = Vec::new();
        while st.ready.is_empty() && st.next_read < end {
            let read = match self.partition.records_from(st.next_read, READ_BYTES) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(queue = %self.name, error = %e, "queue read failed");
                    return false;
                }
            };
            if read.next_offset <= st.next_read {
                break;
            }
            // Offsets without a record (control batches, skipped corrupt batches,
            // compaction) count as settled so the acknowledged floor can pass them.
            let mut expect = st.next_read.max(self.partition.log_start_offset());
            for r in read.records {
                add_gap(&mut gaps, expect, r.offset);
                expect = r.offset + 1;
                if !st.acks.is_acked(r.offset) {
                    // Delivered before a restart and never acknowledged: it may have been
                    // processed, so it goes out flagged.
                    let again = r.offset < st.acks.delivered;
                    st.ready.insert(r.offset, (Arc::new(r), again));
                }
            }
            add_gap(&mut gaps, expect, read.next_offset);
            st.batch_ends.extend(read.batch_ends);
            st.next_read = read.next_offset;
        }
        gaps.retain(|&o| !st.acks.is_acked(o));
        self.mark_acked(st, &gaps);
        !st.ready.is_empty()
    }
}

/// Offsets `from..to` that hold no record; a corrupt batch claiming an absurd range is
/// ignored rather than allocated.
fn add_gap(gaps: &mut Vec<i64>, from: i64, to: i64) {
    if to > from && to - from <= 100_000 {
        gaps.extend(from..to);
    }
}
