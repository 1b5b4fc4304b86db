//! Idempotent producer state: producer ids and epochs (persisted in the internal log
//! `producers`), and per (producer id, partition) the sequence numbers of the last five
//! batches with the offsets they got, so a retried batch gets its original offset back
//! instead of being written twice.
//!
//! The sequence state itself is not persisted: it is rebuilt, the first time a partition
//! sees an idempotent batch after a start, from the headers of the batches at the tail of
//! that partition's log (producer id, epoch and base sequence are all in the header).

use std::collections::{HashMap, VecDeque};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Weak};

use bytes::{Bytes, BytesMut};
use nagare_log::batch::{self, NewRecord, HEADER_LEN};
use nagare_log::AppendInfo;
use parking_lot::Mutex;
use thiserror::Error;
use tokio::sync::oneshot;

use crate::{AckLevel, Broker, CoreError, Partition};

/// Batches remembered per producer and partition (Kafka's `max.in.flight` limit for
/// idempotence is 5, so a retry is always among them).
const REMEMBERED_BATCHES: usize = 5;
/// How many offsets back from the log end the state rebuild looks at.
const REBUILD_OFFSETS: i64 = 100_000;
/// And how many bytes of log at most.
const REBUILD_BYTES: u64 = 256 * 1024 * 1024;

#[derive(Debug, Error)]
pub enum ProduceError {
    /// A batch's sequence does not follow the last one of its producer.
    #[error("out of order sequence {got} for producer {producer_id} (expected {expected})")]
    OutOfOrderSequence {
        producer_id: i64,
        expected: i32,
        got: i32,
    },
    /// A batch from an epoch older than the producer's current one (a zombie producer).
    #[error("producer {producer_id} epoch {got} is older than {current}")]
    InvalidProducerEpoch {
        producer_id: i64,
        got: i16,
        current: i16,
    },
    /// InitProducerId with an id/epoch pair that is not the current one.
    #[error("unknown producer id {0}")]
    UnknownProducerId(i64),
    #[error(transparent)]
    Core(#[from] CoreError),
}

impl From<nagare_log::LogError> for ProduceError {
    fn from(e: nagare_log::LogError) -> Self {
        ProduceError::Core(e.into())
    }
}

/// Where a produced batch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub info: AppendInfo,
    /// The batch was a retry of one already in the log; `info` is the original's.
    pub duplicate: bool,
}

#[derive(Debug, Clone, Copy)]
struct BatchSeq {
    first_seq: i32,
    last_seq: i32,
    base_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
    /// Accepted in the group being appended right now (index in the group): its offsets
    /// are not known yet.
    pending: Option<usize>,
}

#[derive(Debug, Default)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchSeq>,
}

struct PartitionState {
    partition: Weak<Partition>,
    producers: HashMap<i64, ProducerEntry>,
}

/// One batch waiting in a partition's append queue.
struct Pending {
    batch: BytesMut,
    header: batch::BatchHeader,
    done: oneshot::Sender<Result<Appended, ProduceError>>,
}

/// Per partition: the producer state, the queue of batches waiting to be appended, and
/// the lock held by whichever task is appending the queue right now.
struct PartitionSlot {
    state: Mutex<PartitionState>,
    queue: Mutex<Vec<Pending>>,
    appender: Mutex<()>,
}

type SharedState = Arc<PartitionSlot>;

/// Producer ids and the sequence state of every partition.
pub struct Producers {
    log: Arc<Partition>,
    /// Next producer id to hand out, and the current epoch of every id handed out.
    ids: tokio::sync::Mutex<(i64, HashMap<i64, i16>)>,
    partitions: Mutex<HashMap<(String, i32), SharedState>>,
}

impl Producers {
    /// Opens the internal `producers` log and replays the id allocations in it.
    pub fn open(broker: &Broker) -> Result<Producers, CoreError> {
        let log = broker.internal_log("producers")?;
        let mut next = 0i64;
        let mut epochs = HashMap::new();
        log.replay_batches(|b| {
            for r in batch::decode_records(b).map_err(nagare_log::LogError::from)? {
                if let Some((id, epoch)) = r.value.as_deref().and_then(parse_allocation) {
                    next = next.max(id + 1);
                    epochs.insert(id, epoch);
                }
            }
            Ok(())
        })?;
        tracing::info!(
            producers = epochs.len(),
            next_id = next,
            "producer ids replayed"
        );
        Ok(Producers {
            log,
            ids: tokio::sync::Mutex::new((next, epochs)),
            partitions: Mutex::new(HashMap::new()),
        })
    }

    /// Kafka InitProducerId for an idempotent producer: a new id at epoch 0, or, when the
    /// producer gives its current id and epoch, the same id with the epoch bumped (which
    /// fences anything still sending with the old epoch). Persisted before returning.
    pub async fn init_producer_id(
        &self,
        current: Option<(i64, i16)>,
    ) -> Result<(i64, i16), ProduceError> {
        let mut ids = self.ids.lock().await;
        let (id, epoch) = match current {
            Some((id, epoch)) => match ids.1.get(&id) {
                Some(&known) if known == epoch => {
                    if epoch >= i16::MAX - 1 {
                        (ids.0, 0)
                    } else {
                        (id, epoch + 1)
                    }
                }
                Some(&known) if epoch < known => {
                    return Err(ProduceError::InvalidProducerEpoch {
                        producer_id: id,
                        got: epoch,
                        current: known,
                    })
                }
                _ => return Err(ProduceError::UnknownProducerId(id)),
            },
            None => (ids.0, 0),
        };
        let record = NewRecord {
            key: Some(Bytes::from_static(b"producer")),
            value: Some(Bytes::from(format!("{id}:{epoch}"))),
            headers: Vec::new(),
            timestamp: now_ms(),
        };
        self.log
            .append_records(&[record], AckLevel::Durable)
            .await?;
        ids.0 = ids.0.max(id + 1);
        ids.1.insert(id, epoch);
        Ok((id, epoch))
    }

    /// Appends one record batch to `partition`. A batch without a producer id goes straight
    /// to the log; an idempotent one is checked against its producer's sequence first.
    /// Then waits for the fsync that `ack` and the flush policy call for.
    ///
    /// Batches that arrive for one partition while another task is appending are queued and
    /// appended by that task as one group: one lock, one vectored write, one wake-up of the
    /// readers (producers on many connections share the work instead of queueing on the
    /// log's lock one write at a time).
    pub async fn append(
        &self,
        partition: &Arc<Partition>,
        batch: BytesMut,
        ack: AckLevel,
    ) -> Result<Appended, ProduceError> {
        let header = batch::parse_header(&batch).map_err(nagare_log::LogError::from)?;
        let slot = self.state_of(partition);
        let (done, mut result) = oneshot::channel();
        slot.queue.lock().push(Pending {
            batch,
            header,
            done,
        });
        loop {
            match slot.appender.try_lock() {
                Some(guard) => {
                    loop {
                        let group = std::mem::take(&mut *slot.queue.lock());
                        if group.is_empty() {
                            break;
                        }
                        append_group(&slot, partition, group);
                    }
                    drop(guard);
                }
                // The task holding the lock appends our batch with its group.
                None => break,
            }
            // Re-check after letting go: a batch queued between our last look and the
            // unlock would otherwise wait for the next producer.
            if slot.queue.lock().is_empty() {
                break;
            }
        }
        let appended = match result.try_recv() {
            Ok(r) => r,
            Err(_) => result
                .await
                .map_err(|_| ProduceError::Core(CoreError::ShuttingDown))?,
        }?;
        if partition.needs_sync(ack) {
            partition.sync_to(appended.info.last_offset + 1).await?;
        }
        Ok(appended)
    }

    fn state_of(&self, partition: &Arc<Partition>) -> SharedState {
        let key = (partition.topic().to_string(), partition.index());
        self.partitions
            .lock()
            .entry(key)
            .or_insert_with(|| {
                Arc::new(PartitionSlot {
                    state: Mutex::new(PartitionState {
                        partition: Weak::new(),
                        producers: HashMap::new(),
                    }),
                    queue: Mutex::new(Vec::new()),
                    appender: Mutex::new(()),
                })
            })
            .clone()
    }
}

/// What happens to one batch of a group.
enum Decision {
    Append,
    Duplicate(AppendInfo),
    /// A retry of a batch earlier in the same group.
    DuplicateOfPending(usize),
    Refused(ProduceError),
}

/// Appends a group of batches in order: sequence checks for idempotent ones, then one
/// `append_many`, then the answers.
fn append_group(slot: &PartitionSlot, partition: &Arc<Partition>, group: Vec<Pending>) {
    let mut state = slot.state.lock();
    if group.iter().any(|p| p.header.producer_id >= 0)
        && !state
            .partition
            .upgrade()
            .is_some_and(|p| Arc::ptr_eq(&p, partition))
    {
        // First idempotent batch since start (or the topic was re-created).
        state.partition = Arc::downgrade(partition);
        state.producers = rebuild(partition);
    }
    let mut decisions = Vec::with_capacity(group.len());
    for (i, p) in group.iter().enumerate() {
        let h = &p.header;
        if h.producer_id < 0 {
            decisions.push(Decision::Append);
            continue;
        }
        let entry = state.producers.entry(h.producer_id).or_default();
        let last_seq = h.base_sequence.wrapping_add(h.last_offset_delta);
        decisions.push(
            match check(
                entry,
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                last_seq,
            ) {
                Err(e) => Decision::Refused(e),
                Ok(Some(original)) if original.base_offset < 0 => {
                    Decision::DuplicateOfPending((-1 - original.base_offset) as usize)
                }
                Ok(Some(original)) => Decision::Duplicate(original),
                Ok(None) => {
                    if h.producer_epoch > entry.epoch || entry.batches.is_empty() {
                        entry.epoch = h.producer_epoch;
                    }
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
    let mut group = group;
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
        partition.log().append_many(&mut slices)
    };
    drop(slices);
    if !to_append.is_empty() {
        partition.publish_end_offset();
    }
    let mut results: Vec<Option<Result<AppendInfo, ProduceError>>> =
        (0..group.len()).map(|_| None).collect();
    for (&i, r) in to_append.iter().zip(appended) {
        results[i] = Some(r.map_err(ProduceError::from));
    }
    // Settle the provisional sequence entries: real offsets, or gone if the log refused.
    for entry in state.producers.values_mut() {
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
    }
    drop(state);
    for (i, (p, decision)) in group.into_iter().zip(decisions).enumerate() {
        let answer = match decision {
            Decision::Append => results[i]
                .take()
                .unwrap_or(Err(ProduceError::Core(CoreError::ShuttingDown)))
                .map(|info| Appended {
                    info,
                    duplicate: false,
                }),
            Decision::Duplicate(info) => Ok(Appended {
                info,
                duplicate: true,
            }),
            Decision::DuplicateOfPending(j) => match &results[j] {
                Some(Ok(info)) => Ok(Appended {
                    info: *info,
                    duplicate: true,
                }),
                _ => Err(ProduceError::Core(CoreError::ShuttingDown)),
            },
            Decision::Refused(e) => Err(e),
        };
        let _ = p.done.send(answer);
    }
}

/// Decides what to do with a batch: `Some(original)` for a retry of a remembered batch,
/// `None` to append it, or an error.
fn check(
    entry: &mut ProducerEntry,
    producer_id: i64,
    epoch: i16,
    first_seq: i32,
    last_seq: i32,
) -> Result<Option<AppendInfo>, ProduceError> {
    if entry.batches.is_empty() {
        // Nothing known (a new producer, or its batches left the log): accept.
        return Ok(None);
    }
    if epoch < entry.epoch {
        return Err(ProduceError::InvalidProducerEpoch {
            producer_id,
            got: epoch,
            current: entry.epoch,
        });
    }
    if epoch > entry.epoch {
        // A bumped epoch restarts the sequence at 0.
        if first_seq != 0 {
            return Err(ProduceError::OutOfOrderSequence {
                producer_id,
                expected: 0,
                got: first_seq,
            });
        }
        entry.batches.clear();
        return Ok(None);
    }
    if let Some(b) = entry
        .batches
        .iter()
        .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
    {
        return Ok(Some(AppendInfo {
            base_offset: b.base_offset,
            last_offset: b.last_offset,
            max_timestamp: b.max_timestamp,
            record_count: (b.last_offset - b.base_offset + 1) as u32,
        }));
    }
    let expected = entry.batches.back().map_or(0, |b| next_seq(b.last_seq));
    if first_seq != expected {
        return Err(ProduceError::OutOfOrderSequence {
            producer_id,
            expected,
            got: first_seq,
        });
    }
    Ok(None)
}

fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

fn remember(entry: &mut ProducerEntry, seq: BatchSeq) {
    entry.batches.push_back(seq);
    while entry.batches.len() > REMEMBERED_BATCHES {
        entry.batches.pop_front();
    }
}

/// Reads the headers of the batches at the tail of the log (never the records) and
/// replays their producer ids, epochs and sequences.
fn rebuild(partition: &Partition) -> HashMap<i64, ProducerEntry> {
    let mut producers: HashMap<i64, ProducerEntry> = HashMap::new();
    let start = partition
        .log_start_offset()
        .max(partition.log_end_offset() - REBUILD_OFFSETS);
    let read = match partition.read(start, REBUILD_BYTES) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(topic = partition.topic(), error = %e, "producer state rebuild failed");
            return producers;
        }
    };
    let mut head = [0u8; HEADER_LEN];
    for slice in &read.slices {
        let end = slice.position + slice.len as u64;
        let mut at = slice.position;
        while at + HEADER_LEN as u64 <= end {
            if slice.file.read_exact_at(&mut head, at).is_err() {
                break;
            }
            let Ok(h) = batch::parse_header(&head) else {
                break;
            };
            at += h.total_len() as u64;
            if h.producer_id < 0 || h.base_sequence < 0 {
                continue;
            }
            let entry = producers.entry(h.producer_id).or_default();
            if h.producer_epoch != entry.epoch {
                entry.batches.clear();
                entry.epoch = h.producer_epoch;
            }
            remember(
                entry,
                BatchSeq {
                    first_seq: h.base_sequence,
                    last_seq: h.base_sequence.wrapping_add(h.last_offset_delta),
                    base_offset: h.base_offset,
                    last_offset: h.last_offset(),
                    max_timestamp: h.max_timestamp,
                    pending: None,
                },
            );
        }
    }
    producers
}

fn parse_allocation(v: &[u8]) -> Option<(i64, i16)> {
    let s = std::str::from_utf8(v).ok()?;
    let (id, epoch) = s.split_once(':')?;
    Some((id.parse().ok()?, epoch.parse().ok()?))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry_with(seqs: &[(i32, i32, i64)]) -> ProducerEntry {
        let mut e = ProducerEntry::default();
        for &(f, l, o) in seqs {
            remember(
                &mut e,
                BatchSeq {
                    first_seq: f,
                    last_seq: l,
                    base_offset: o,
                    last_offset: o + (l - f) as i64,
                    max_timestamp: 0,
                    pending: None,
                },
            );
        }
        e
    }

    #[test]
    fn next_in_sequence_is_appended() {
        let mut e = entry_with(&[(0, 9, 100)]);
        assert!(check(&mut e, 1, 0, 10, 19).unwrap().is_none());
    }

    #[test]
    fn duplicate_returns_original_offsets() {
        let mut e = entry_with(&[(0, 9, 100), (10, 19, 110)]);
        let dup = check(&mut e, 1, 0, 0, 9).unwrap().unwrap();
        assert_eq!(dup.base_offset, 100);
        assert_eq!(dup.last_offset, 109);
    }

    #[test]
    fn gap_is_out_of_order() {
        let mut e = entry_with(&[(0, 9, 100)]);
        assert!(matches!(
            check(&mut e, 1, 0, 20, 29),
            Err(ProduceError::OutOfOrderSequence { expected: 10, .. })
        ));
    }

    #[test]
    fn stale_epoch_is_fenced_and_new_epoch_restarts() {
        let mut e = entry_with(&[(0, 9, 100)]);
        e.epoch = 3;
        assert!(matches!(
            check(&mut e, 1, 2, 10, 19),
            Err(ProduceError::InvalidProducerEpoch { .. })
        ));
        assert!(matches!(
            check(&mut e, 1, 4, 5, 9),
            Err(ProduceError::OutOfOrderSequence { .. })
        ));
        assert!(check(&mut e, 1, 4, 0, 9).unwrap().is_none());
    }

    #[test]
    fn only_five_batches_are_remembered() {
        let e = entry_with(&[
            (0, 0, 0),
            (1, 1, 1),
            (2, 2, 2),
            (3, 3, 3),
            (4, 4, 4),
            (5, 5, 5),
        ]);
        assert_eq!(e.batches.len(), 5);
        assert_eq!(e.batches.front().unwrap().first_seq, 1);
    }

    #[test]
    fn allocation_records_parse() {
        assert_eq!(parse_allocation(b"42:3"), Some((42, 3)));
        assert_eq!(parse_allocation(b"x"), None);
    }
}
