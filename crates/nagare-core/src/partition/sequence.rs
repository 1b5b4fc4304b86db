//! Idempotent producers' sequence state of one partition: per producer id, its epoch and
//! the sequence numbers of its last five batches with the offsets they got, so a retried
//! batch gets its original offset back instead of being written twice.
//!
//! The state is not persisted: it is rebuilt, the first time the partition sees an
//! idempotent batch after a start, from the headers of the batches at the tail of the log
//! (producer id, epoch and base sequence are all in the header). The rebuild reads up to
//! 256 MiB, so it runs on the blocking pool.

use std::collections::{HashMap, VecDeque};
use std::os::unix::fs::FileExt;

use nagare_log::batch::{self, HEADER_LEN};
use nagare_log::{AppendInfo, PartitionLog};
use parking_lot::Mutex;
use tokio::sync::OnceCell;

use crate::CoreError;

/// Batches remembered per producer (Kafka's `max.in.flight` limit for idempotence is 5,
/// so a retry is always among them).
const REMEMBERED_BATCHES: usize = 5;
/// How many offsets back from the log end the rebuild looks at.
const REBUILD_OFFSETS: i64 = 100_000;
/// And how many bytes of log at most.
const REBUILD_BYTES: u64 = 256 * 1024 * 1024;

#[derive(Debug, Clone, Copy)]
pub(super) struct BatchSeq {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    /// Accepted in the group being appended right now (index in the group): its offsets
    /// are not known yet.
    pub pending: Option<usize>,
}

#[derive(Debug, Default)]
pub(super) struct ProducerEntry {
    pub epoch: i16,
    /// `epoch` was seen in the log (a batch or a transaction marker), so a lower one is
    /// fenced even when no batch is remembered (after a marker that bumped the epoch).
    pub known: bool,
    pub batches: VecDeque<BatchSeq>,
    /// Timestamp of the producer's last batch or marker here.
    pub last_timestamp: i64,
    /// Coordinator epoch of the producer's last transaction marker here.
    pub coordinator_epoch: Option<i32>,
}

impl ProducerEntry {
    /// Accounts a transaction marker: a higher epoch (the coordinator bumped it to fence
    /// a zombie) restarts the sequence.
    pub(super) fn on_marker(&mut self, epoch: i16, coordinator_epoch: i32, timestamp: i64) {
        if !self.known || epoch > self.epoch {
            if epoch != self.epoch {
                self.batches.clear();
            }
            self.epoch = epoch;
        }
        self.known = true;
        self.coordinator_epoch = Some(coordinator_epoch);
        self.last_timestamp = self.last_timestamp.max(timestamp);
    }
}

/// The sequence state, loaded from the log on first use.
#[derive(Default)]
pub(super) struct ProducerStates {
    loaded: OnceCell<()>,
    pub producers: Mutex<HashMap<i64, ProducerEntry>>,
}

impl ProducerStates {
    /// Rebuilds the state from the log's tail once (on the blocking pool); every
    /// idempotent batch waits for it before it is queued, so none is checked against a
    /// state that does not know the log's tail yet.
    pub(super) async fn ensure_loaded(
        &self,
        log: &std::sync::Arc<PartitionLog>,
    ) -> Result<(), CoreError> {
        self.loaded
            .get_or_try_init(|| async {
                let log = log.clone();
                let rebuilt = tokio::task::spawn_blocking(move || rebuild(&log))
                    .await
                    .map_err(|_| CoreError::ShuttingDown)?;
                *self.producers.lock() = rebuilt;
                Ok::<(), CoreError>(())
            })
            .await?;
        Ok(())
    }
}

/// Why an idempotent batch was refused.
pub(super) enum SequenceError {
    OutOfOrder { expected: i32, got: i32 },
    StaleEpoch { got: i16, current: i16 },
}

impl SequenceError {
    pub(super) fn into_core(self, producer_id: i64) -> CoreError {
        match self {
            SequenceError::OutOfOrder { expected, got } => CoreError::OutOfOrderSequence {
                producer_id,
                expected,
                got,
            },
            SequenceError::StaleEpoch { got, current } => CoreError::InvalidProducerEpoch {
                producer_id,
                got,
                current,
            },
        }
    }
}

/// Decides what to do with a batch: `Some(original)` for a retry of a remembered batch,
/// `None` to append it, or an error.
pub(super) fn check(
    entry: &mut ProducerEntry,
    epoch: i16,
    first_seq: i32,
    last_seq: i32,
) -> Result<Option<AppendInfo>, SequenceError> {
    if entry.batches.is_empty() {
        if entry.known && epoch < entry.epoch {
            return Err(SequenceError::StaleEpoch {
                got: epoch,
                current: entry.epoch,
            });
        }
        // Nothing known (a new producer, or its batches left the log): accept.
        return Ok(None);
    }
    if epoch < entry.epoch {
        return Err(SequenceError::StaleEpoch {
            got: epoch,
            current: entry.epoch,
        });
    }
    if epoch > entry.epoch {
        // A bumped epoch restarts the sequence at 0.
        if first_seq != 0 {
            return Err(SequenceError::OutOfOrder {
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
        return Err(SequenceError::OutOfOrder {
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

pub(super) fn remember(entry: &mut ProducerEntry, seq: BatchSeq) {
    entry.known = true;
    entry.last_timestamp = entry.last_timestamp.max(seq.max_timestamp);
    entry.batches.push_back(seq);
    while entry.batches.len() > REMEMBERED_BATCHES {
        entry.batches.pop_front();
    }
}

/// Reads the headers of the batches at the tail of the log (never the records) and
/// replays their producer ids, epochs and sequences. Blocking.
fn rebuild(log: &PartitionLog) -> HashMap<i64, ProducerEntry> {
    let mut producers: HashMap<i64, ProducerEntry> = HashMap::new();
    let start = log
        .log_start_offset()
        .max(log.log_end_offset() - REBUILD_OFFSETS);
    let read = match log.read(start, REBUILD_BYTES) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "producer state rebuild failed");
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
            let batch_at = at;
            at += h.total_len() as u64;
            if h.producer_id >= 0 && h.is_control() {
                let marker = read_marker(&slice.file, batch_at, h.total_len());
                producers.entry(h.producer_id).or_default().on_marker(
                    h.producer_epoch,
                    marker.map_or(-1, |m| m.coordinator_epoch),
                    h.max_timestamp,
                );
                continue;
            }
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

/// The marker of the control batch at `at` in `file` (a few dozen bytes).
fn read_marker(
    file: &std::fs::File,
    at: u64,
    len: usize,
) -> Option<nagare_log::control::ControlMarker> {
    let mut buf = vec![0u8; len.min(4096)];
    file.read_exact_at(&mut buf, at).ok()?;
    nagare_log::control::parse_control(&buf).ok().flatten()
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
        assert!(matches!(check(&mut e, 0, 10, 19), Ok(None)));
    }

    #[test]
    fn duplicate_returns_original_offsets() {
        let mut e = entry_with(&[(0, 9, 100), (10, 19, 110)]);
        let Ok(Some(dup)) = check(&mut e, 0, 0, 9) else {
            panic!("not a duplicate")
        };
        assert_eq!(dup.base_offset, 100);
        assert_eq!(dup.last_offset, 109);
    }

    #[test]
    fn gap_is_out_of_order() {
        let mut e = entry_with(&[(0, 9, 100)]);
        assert!(matches!(
            check(&mut e, 0, 20, 29),
            Err(SequenceError::OutOfOrder { expected: 10, .. })
        ));
    }

    #[test]
    fn stale_epoch_is_fenced_and_new_epoch_restarts() {
        let mut e = entry_with(&[(0, 9, 100)]);
        e.epoch = 3;
        assert!(matches!(
            check(&mut e, 2, 10, 19),
            Err(SequenceError::StaleEpoch { .. })
        ));
        assert!(matches!(
            check(&mut e, 4, 5, 9),
            Err(SequenceError::OutOfOrder { .. })
        ));
        assert!(matches!(check(&mut e, 4, 0, 9), Ok(None)));
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
        assert_eq!(e.batches.front().map(|b| b.first_seq), Some(1));
    }
}
