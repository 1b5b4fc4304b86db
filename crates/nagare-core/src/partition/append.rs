//! The one append path of the core. Every writer (Kafka produce, idempotent producers,
//! STOMP SEND, forward chunks, internal logs) comes through [`Partition::append`] or
//! [`Partition::append_batches`]:
//!
//! 1. the size limit (`max.message.bytes`) and the batch header are checked;
//! 2. an idempotent batch waits, once per partition, for its producers' sequence state;
//! 3. the batch joins the partition's append queue; whichever task finds the queue free
//!    appends everything queued at that moment as one group: sequence checks, one
//!    vectored write to the page cache, one wake-up of the readers (producers on many
//!    connections share the work instead of queueing on the log's lock one write at a
//!    time); Kafka's pipelined Produce requests wait one turn in the queue first
//!    ([`Partition::append_batches_together`]), so the requests of one read go out in
//!    one write;
//! 4. the caller then waits for the fsync its ack level and the topic's flush policy
//!    call for; waiters queue without a thread, and one fsync covers every offset
//!    appended before it started (group commit).
//!
//! Step 3 writes to the page cache on the calling runtime thread: it does not wait for
//! the disk (see the blocking rule in the crate docs). Step 4's fsync runs on the
//! blocking pool.

use bytes::BytesMut;
use nagare_log::batch::{self, build_batch, BatchHeader, NewRecord};
use nagare_log::{AppendInfo, PartitionLog};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::sequence::{check, remember, BatchSeq};
use super::{AckLevel, Partition, Store};
use crate::{CoreError, TopicFlush};

type Answer = Result<AppendInfo, CoreError>;

/// One batch waiting in the append queue.
struct Pending {
    batch: BytesMut,
    header: BatchHeader,
    done: oneshot::Sender<Answer>,
}

/// The batches waiting to be appended, and the lock held by whichever task is appending
/// them right now.
#[derive(Default)]
pub(super) struct AppendQueue {
    queue: Mutex<Vec<Pending>>,
    appender: Mutex<()>,
}

/// Appends what is queued when dropped, also when the task is cancelled while its
/// batches wait in the queue (its connection closed): they are appended now, not left
/// for whichever producer comes next.
struct AppendOnDrop<'a> {
    partition: &'a Partition,
    log: &'a PartitionLog,
}

impl Drop for AppendOnDrop<'_> {
    fn drop(&mut self) {
        self.partition.append_queued(self.log);
    }
}

/// What happens to one batch of a group.
enum Decision {
    Append,
    /// A retry of a batch already in the log: answered with the original's offsets.
    Duplicate(AppendInfo),
    /// A retry of a batch earlier in the same group.
    DuplicateOfPending(usize),
    Refused(CoreError),
}

impl Partition {
    /// Appends one Kafka record batch v2 (assigning its offsets) and returns once it is
    /// as durable as `ack` and the flush policy require. A batch with a producer id is
    /// checked against its producer's sequence first; a retry of a batch already in the
    /// log gets the original's offsets and is not written again.
    pub async fn append(&self, batch: BytesMut, ack: AckLevel) -> Result<AppendInfo, CoreError> {
        self.append_batches(vec![batch], ack)
            .await
            .pop()
            .unwrap_or(Err(CoreError::ShuttingDown))
    }

    /// Appends several batches in order (the batches of one produce request), in one
    /// write when nothing else is queued, with one fsync for all. One result per batch.
    /// A batch over the size limit or with an unreadable header refuses them all, as a
    /// request is validated as a whole.
    pub async fn append_batches(&self, batches: Vec<BytesMut>, ack: AckLevel) -> Vec<Answer> {
        self.append_batches_in(batches, ack, false).await
    }

    /// [`append_batches`](Self::append_batches) for a front end that starts the appends
    /// of several requests in one turn (Kafka's pipelined Produce requests of one
    /// connection): the batches wait in the queue for one turn (`crate::turn`) before
    /// the append, so the requests started together reach the log in one write
    /// instead of one write each.
    pub async fn append_batches_together(
        &self,
        batches: Vec<BytesMut>,
        ack: AckLevel,
    ) -> Vec<Answer> {
        self.append_batches_in(batches, ack, true).await
    }

    async fn append_batches_in(
        &self,
        batches: Vec<BytesMut>,
        ack: AckLevel,
        together: bool,
    ) -> Vec<Answer> {
        let log = match &self.store {
            Store::Local(log) => log,
            Store::Remote(remote) => return self.append_batches_remote(remote, batches).await,
        };
        let count = batches.len();
        let refuse_all = |e: CoreError| -> Vec<Answer> {
            let mut out: Vec<Answer> = (1..count).map(|_| Err(e.same())).collect();
            out.push(Err(e));
            out
        };
        let limit = self.max_message_bytes() as usize;
        let mut items = Vec::with_capacity(count);
        let mut idempotent = false;
        for batch in batches {
            let batch = match self.apply_topic_codec(batch) {
                Ok(b) => b,
                Err(e) => return refuse_all(e),
            };
            if batch.len() > limit {
                return refuse_all(CoreError::MessageTooLarge {
                    size: batch.len(),
                    limit,
                });
            }
            match batch::parse_header(&batch) {
                Ok(header) => {
                    idempotent |= header.producer_id >= 0;
                    items.push((batch, header));
                }
                Err(e) => return refuse_all(CoreError::Log(e.into())),
            }
        }
        if let Err(e) = crate::cleaner::refuse_keyless(self, &items) {
            return refuse_all(e);
        }
        if idempotent {
            if let Err(e) = self.producers.ensure_loaded(log).await {
                return refuse_all(e);
            }
        }
        let receivers = self.queue_batches(items);
        let appender = AppendOnDrop {
            partition: self,
            log,
        };
        if together {
            // One turn, so that the connection's other Produce requests (polled after
            // this one) queue first; the turn hands its waker back to the caller rather
            // than waking itself (`crate::turn`).
            crate::turn::yield_turn().await;
        }
        drop(appender);
        let mut answers = Vec::with_capacity(count);
        let mut end = -1;
        for mut rx in receivers {
            let answer = match rx.try_recv() {
                Ok(a) => a,
                Err(_) => rx.await.unwrap_or(Err(CoreError::ShuttingDown)),
            };
            if let Ok(info) = &answer {
                end = end.max(info.last_offset + 1);
            }
            answers.push(answer);
        }
        if end >= 0 {
            if let Err(e) = self.wait_durable(end, ack).await {
                return refuse_all(e);
            }
        }
        answers
    }

    /// Builds one batch from plain records (STOMP, forward, internal logs) and appends it.
    pub async fn append_records(
        &self,
        records: &[NewRecord],
        ack: AckLevel,
    ) -> Result<AppendInfo, CoreError> {
        match &self.store {
            Store::Local(_) => self.append(build_batch(records), ack).await,
            Store::Remote(remote) => self.append_records_remote(remote, records).await,
        }
    }

    /// Whether an append acknowledged at `ack` must wait for an fsync. Never for a
    /// cluster's partition: its appends return once the cluster has acknowledged them.
    pub fn needs_sync(&self, ack: AckLevel) -> bool {
        if self.is_remote() {
            return false;
        }
        match (self.flush_policy(), ack) {
            (_, AckLevel::None) | (TopicFlush::Never, _) => false,
            (TopicFlush::Always, _) => true,
            (TopicFlush::Acks | TopicFlush::Interval(_), AckLevel::Durable) => true,
            (TopicFlush::Acks | TopicFlush::Interval(_), AckLevel::Leader) => false,
        }
    }

    /// Waits until everything below `end` is as durable as `ack` requires.
    pub async fn wait_durable(&self, end: i64, ack: AckLevel) -> Result<(), CoreError> {
        if self.needs_sync(ack) {
            self.sync_to(end).await
        } else {
            Ok(())
        }
    }

    /// Group commit: waits until every offset below `offset` is on disk. One fsync thread
    /// per busy partition covers every waiter at once (`syncer.rs`); if its fsync failed,
    /// the waiter fsyncs itself to get the error to report.
    pub async fn sync_to(&self, offset: i64) -> Result<(), CoreError> {
        let Store::Local(log) = &self.store else {
            // Acknowledged by the cluster before the append returned.
            return Ok(());
        };
        if log.flushed_offset() >= offset || self.syncer.wait(log, offset).await {
            return Ok(());
        }
        let log = log.clone();
        tokio::task::spawn_blocking(move || log.sync_to(offset))
            .await
            .map_err(|_| CoreError::ShuttingDown)?
            .map_err(|e| self.core_error(e))
    }

    /// Queues the batches in order; returns one receiver per batch.
    fn queue_batches(&self, items: Vec<(BytesMut, BatchHeader)>) -> Vec<oneshot::Receiver<Answer>> {
        let mut receivers = Vec::with_capacity(items.len());
        let mut queue = self.appends.queue.lock();
        for (batch, header) in items {
            let (done, rx) = oneshot::channel();
            queue.push(Pending {
                batch,
                header,
                done,
            });
            receivers.push(rx);
        }
        receivers
    }

    /// If no other task is appending, appends the queue until it is empty (what this task
    /// queued may already have gone with another task's group).
    fn append_queued(&self, log: &PartitionLog) {
        loop {
            match self.appends.appender.try_lock() {
                Some(guard) => {
                    loop {
                        let group = std::mem::take(&mut *self.appends.queue.lock());
                        if group.is_empty() {
                            break;
                        }
                        self.append_group(log, group);
                    }
                    drop(guard);
                }
                // The task holding the lock appends our batches with its group.
                None => break,
            }
            // Re-check after letting go: a batch queued between our last look and the
            // unlock would otherwise wait for the next producer.
            if self.appends.queue.lock().is_empty() {
                break;
            }
        }
    }

    /// Appends a group of batches in order: sequence checks for idempotent ones, then one
    /// write, one publish of the new end, then the answers.
    fn append_group(&self, log: &PartitionLog, mut group: Vec<Pending>) {
        let mut producers = self.producers.producers.lock();
        let mut decisions = Vec::with_capacity(group.len());
        for (i, p) in group.iter().enumerate() {
            let h = &p.header;
            if h.producer_id < 0 {
                decisions.push(Decision::Append);
                continue;
            }
            let entry = producers.entry(h.producer_id).or_default();
            if h.is_control() {
                // A transaction marker (written by the coordinator): fenced by a newer
                // epoch, never by sequence.
                decisions.push(if entry.known && h.producer_epoch < entry.epoch {
                    Decision::Refused(CoreError::InvalidProducerEpoch {
                        producer_id: h.producer_id,
                        got: h.producer_epoch,
                        current: entry.epoch,
                    })
                } else {
                    Decision::Append
                });
                continue;
            }
            let last_seq = h.base_sequence.wrapping_add(h.last_offset_delta);
            decisions.push(
                match check(entry, h.producer_epoch, h.base_sequence, last_seq) {
                    Err(e) => Decision::Refused(e.into_core(h.producer_id)),
                    Ok(Some(original)) if original.base_offset < 0 => {
                        Decision::DuplicateOfPending((-1 - original.base_offset) as usize)
                    }
                    Ok(Some(original)) => Decision::Duplicate(original),
                    Ok(None) => {
                        if h.producer_epoch > entry.epoch || entry.batches.is_empty() {
                            entry.epoch = h.producer_epoch;
                        }
                        // Provisional until the write: a negative base offset names
                        // the batch's place in this group.
                        remember(
                            entry,
                            BatchSeq {
                                first_seq: h.base_sequence,
                                last_seq,
                                base_offset: -1 - i as i64,
                                last_offset: -1,
                                max_timestamp: -1,
                                pending: Some(i),
                            },
                        );
                        Decision::Append
                    }
                },
            );
        }
        let mut to_append: Vec<usize> = Vec::new();
        let mut slices: Vec<&mut [u8]> = Vec::new();
        for (i, p) in group.iter_mut().enumerate() {
            if matches!(decisions[i], Decision::Append) {
                to_append.push(i);
                slices.push(&mut p.batch[..]);
            }
        }
        let appended = if slices.is_empty() {
            Vec::new()
        } else {
            log.append_many(&mut slices)
        };
        drop(slices);
        if !to_append.is_empty() {
            self.publish_end_offset();
        }
        let mut results: Vec<Option<Answer>> = (0..group.len()).map(|_| None).collect();
        let (mut records_in, mut bytes_in) = (0u64, 0u64);
        for (&i, r) in to_append.iter().zip(appended) {
            if r.is_ok() {
                records_in += group[i].header.last_offset_delta as u64 + 1;
                bytes_in += group[i].batch.len() as u64;
            }
            results[i] = Some(r.map_err(|e| self.core_error(e)));
        }
        // Once per group, not per batch or record: the append path stays cheap.
        if records_in > 0 {
            self.meter.count_in(records_in, bytes_in);
        }
        // Markers written move their producer's epoch (a bumped one fences zombies).
        for &i in &to_append {
            let h = &group[i].header;
            if h.is_control() && matches!(results[i], Some(Ok(_))) {
                let marker = nagare_log::control::parse_control(&group[i].batch)
                    .ok()
                    .flatten();
                producers.entry(h.producer_id).or_default().on_marker(
                    h.producer_epoch,
                    marker.map_or(-1, |m| m.coordinator_epoch),
                    h.max_timestamp,
                );
            }
        }
        // Settle the provisional sequence entries: real offsets, or gone if the log
        // refused the batch.
        for entry in producers.values_mut() {
            entry.batches.retain_mut(|b| match b.pending.take() {
                None => true,
                Some(i) => match &results[i] {
                    Some(Ok(info)) => {
                        b.base_offset = info.base_offset;
                        b.last_offset = info.last_offset;
                        b.max_timestamp = info.max_timestamp;
                        true
                    }
                    _ => false,
                },
            });
            if let Some(b) = entry.batches.back() {
                entry.last_timestamp = entry.last_timestamp.max(b.max_timestamp);
            }
        }
        drop(producers);
        for (i, (p, decision)) in group.into_iter().zip(decisions).enumerate() {
            let answer = match decision {
                Decision::Append => results[i].take().unwrap_or(Err(CoreError::ShuttingDown)),
                Decision::Duplicate(info) => Ok(info),
                Decision::DuplicateOfPending(j) => match &results[j] {
                    Some(Ok(info)) => Ok(*info),
                    Some(Err(e)) => Err(e.same()),
                    None => Err(CoreError::ShuttingDown),
                },
                Decision::Refused(e) => Err(e),
            };
            let _ = p.done.send(answer);
        }
    }
}

#[cfg(test)]
#[path = "append_tests.rs"]
mod tests;
