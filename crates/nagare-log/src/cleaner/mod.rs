//! Log compaction, Kafka's log cleaner: keep the latest record of every key.
//!
//! A pass over one partition (`PartitionLog::clean`, in `partition_log/compact.rs`):
//!
//! 1. The **dirty section** runs from the checkpointed first-dirty offset to the first
//!    uncleanable offset: the active segment, or the first segment holding records newer
//!    than `min.compaction.lag.ms`.
//! 2. An [`OffsetMap`] of fixed size (the dedupe buffer) maps the hash of every key in the
//!    dirty section to its latest offset. When it fills up, the pass stops at a batch
//!    boundary and the rest waits for the next pass: memory stays bounded whatever the
//!    data, at the cost of more passes.
//! 3. Every segment from the log start up to where the map ends is copied, in groups that
//!    fit `segment.bytes`, keeping a record unless a later offset holds its key, it has no
//!    key, or it is a tombstone that has been in the clean section for
//!    `delete.retention.ms`. Batches keep their offsets (leaving holes) and a group ends
//!    with its original last offset (an empty batch if needed). A partly kept batch is
//!    re-encoded with its own codec. Aborted transactional data goes; a transaction
//!    marker goes once its transaction has no data left and a delete horizon passed
//!    (`marker`), its `.txnindex` entry with it.
//! 4. Each group's new file is written as `<base>.log.cleaned`, fsynced, renamed to
//!    `<base>.log.swap` (the commit point), then the old segments are removed and the swap
//!    file renamed to `<base>.log`. Opening a log finishes or discards whatever a crash
//!    interrupted (`recover_swaps`).
//! 5. The checkpoint moves past the cleaned range.
//!
//! A pass is worth running when the dirty bytes are at least `min.cleanable.dirty.ratio`
//! of the cleanable bytes, when dirty records are older than `max.compaction.lag.ms`
//! (the cleaner thread first rolls an active segment that old), or when a marker or
//! tombstone a pass kept reached its delete horizon (the checkpoint dates the earliest).

pub(crate) mod checkpoint;
pub(crate) mod filter;
pub(crate) mod marker;
mod offset_map;
mod throttle;

use std::time::Duration;

pub use offset_map::{OffsetMap, SLOT_BYTES};
pub use throttle::Throttle;

/// A partition's compaction settings (its topic's configs).
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionConfig {
    /// `delete.retention.ms`: how long tombstones stay once cleaned.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: records younger than this are not compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: dirty records older than this are compacted whatever
    /// the dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: f64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            delete_retention_ms: 24 * 3600 * 1000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
        }
    }
}

/// What the cleaner thread owns across partitions: the dedupe buffer and the I/O
/// throttle, allocated once.
pub struct Cleaner {
    pub map: OffsetMap,
    pub throttle: Throttle,
}

impl Cleaner {
    /// `dedupe_buffer_bytes` as Kafka's `log.cleaner.dedupe.buffer.size`, the load factor
    /// as `log.cleaner.io.buffer.load.factor` (0.9), `io_bytes_per_sec` as
    /// `log.cleaner.io.max.bytes.per.second` (`None`: unlimited).
    pub fn new(dedupe_buffer_bytes: usize, io_bytes_per_sec: Option<u64>) -> Cleaner {
        Cleaner {
            map: OffsetMap::with_memory(dedupe_buffer_bytes, 0.9),
            throttle: Throttle::new(io_bytes_per_sec),
        }
    }
}

/// How dirty a partition is, to pick the one to clean first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cleanability {
    /// Bytes of the clean section (already compacted) and of the cleanable dirty part.
    pub clean_bytes: u64,
    pub dirty_bytes: u64,
    /// Dirty records are older than `max.compaction.lag.ms`.
    pub overdue: bool,
    /// A marker or tombstone of the clean section reached its delete horizon.
    pub horizon_due: bool,
}

impl Cleanability {
    pub fn dirty_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.dirty_bytes;
        if total == 0 {
            0.0
        } else {
            self.dirty_bytes as f64 / total as f64
        }
    }

    /// Whether a pass is due under `config`.
    pub fn needs_cleaning(&self, config: &CompactionConfig) -> bool {
        self.horizon_due
            || (self.dirty_bytes > 0
                && (self.overdue || self.dirty_ratio() >= config.min_cleanable_dirty_ratio))
    }
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CleanStats {
    /// Bytes read (building the map and copying) and written.
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Bytes of the segments replaced and of their replacements.
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_read: u64,
    pub records_removed: u64,
    pub tombstones_removed: u64,
    /// Transaction markers dropped (their data gone and their delete horizon passed).
    pub markers_removed: u64,
    pub segments_before: usize,
    pub segments_after: usize,
    /// Keys in the offset map and the offset the pass cleaned up to.
    pub map_entries: usize,
    pub cleaned_up_to: i64,
    /// The map filled before the end of the dirty section: another pass is needed.
    pub map_full: bool,
    pub elapsed: Duration,
    /// Time the rate limit made the pass sleep.
    pub throttled: Duration,
}

/// Whether every record of a (whole, stored or produced) batch has a key: a compacted
/// topic refuses records without one.
pub fn all_records_keyed(batch: &[u8]) -> Result<bool, crate::BatchError> {
    let header = crate::batch::parse_header(batch)?;
    let mut keyed = true;
    filter::for_each_record(batch, &header, |r| keyed &= r.key.is_some())?;
    Ok(keyed)
}
