//! One partition's log: a directory of segments (see the crate docs). The work is split
//! by job: `recovery` opens a directory and repairs a torn tail, `append` validates,
//! assigns offsets and rolls, `read` locates whole batches for fetches and timestamp
//! lookups, `sync` owns fsync and group commit, `truncate` cuts the tail, `retention`
//! deletes old segments. This file holds the shared state and the small helpers they use.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use crate::open_files::Lent;
use crate::segment::{Io, Segment};
use crate::storage::OpenMode;
use crate::{LogConfig, LogError};

mod append;
mod compact;
mod compact_files;
mod read;
mod recovery;
mod retention;
mod roll_settings;
mod sync;
mod truncate;
mod txn;

/// Where an appended batch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    /// Largest record timestamp of the batch.
    pub max_timestamp: i64,
    pub record_count: u32,
}

/// A byte range of a segment file holding whole batches, for `sendfile(2)`. The file
/// stays open while the slice lives, even if the open-file budget closes it meanwhile,
/// so the slice counts against that budget until it (and every clone) is dropped.
#[derive(Debug, Clone)]
pub struct FileSlice {
    pub file: Arc<File>,
    pub position: u64,
    pub len: u32,
    _lent: Arc<Lent>,
}

/// What a read returned: whole batches starting with the one holding the requested
/// offset, plus the partition's offsets at the time of the read.
#[derive(Debug, Clone, Default)]
pub struct ReadResult {
    pub slices: Vec<FileSlice>,
    /// Whole batches following the slices, copied into memory because the open-file
    /// budget had no room for more slices (empty otherwise).
    pub copied: Bytes,
    pub total_bytes: u64,
    pub log_start_offset: i64,
    pub high_watermark: i64,
    /// The last stable offset at the time of the read.
    pub last_stable_offset: i64,
    /// The offset after the last batch returned (the requested offset when nothing was):
    /// how far a reader got, for counting the records it was handed.
    pub next_offset: i64,
}

/// Written by `close()` after everything is fsynced, removed by `open()`: when it is
/// missing at open, the last shutdown was not clean and the tail is recovered.
const CLEAN_SHUTDOWN_FILE: &str = ".nagare_cleanshutdown";
/// The log start offset when `delete_records_before` moved it inside a segment.
const LOG_START_FILE: &str = "log-start-offset";
/// The base of a segment such that every earlier segment is fsynced: recovery after an
/// unclean shutdown checks the CRC of every batch from there on (a power cut can tear an
/// unsynced rolled segment anywhere) and trusts the indexes before it.
const RECOVERY_POINT_FILE: &str = "recovery-point";
/// Recovery refuses to read batches claiming more than this (or the configured maximum,
/// if larger), so a corrupt length cannot cause a huge allocation.
const RECOVERY_MAX_BATCH: usize = 64 * 1024 * 1024;

/// One partition's log: a directory of segments. See the crate docs.
pub struct PartitionLog {
    dir: PathBuf,
    config: LogConfig,
    io: Io,
    /// Ordered by base offset; the last one is active. Readers hold the read lock while
    /// they locate data; roll, truncation and retention take the write lock.
    segments: RwLock<Vec<Arc<Segment>>>,
    writer: Mutex<Writer>,
    /// What readers may see: updated only after a write completes.
    published: Mutex<Published>,
    start_offset: AtomicI64,
    flushed: AtomicI64,
    /// Serialises fsyncs (group commit). A std mutex, not parking_lot's: its waiters
    /// queue for a whole fsync (a millisecond), and parking_lot's spin-then-yield before
    /// parking cost several `sched_yield` calls per waiter for nothing.
    sync_lock: std::sync::Mutex<()>,
    /// Rolled segments whose data and indexes still need an fsync.
    unsynced: Mutex<Vec<Arc<Segment>>>,
    /// A segment file was created or removed since the last directory fsync.
    dir_dirty: AtomicBool,
    /// Every segment below this base is fsynced (what `RECOVERY_POINT_FILE` holds).
    recovery_point: AtomicI64,
    /// A segment base the recovery point could not move to (no snapshot of the open
    /// transactions there, and no checkpoint): asking again at every fsync would only
    /// repeat the failed lookup (one `openat` per fsync), and the answer cannot change
    /// until the next roll brings a new base with its snapshot.
    no_checkpoint_at: AtomicI64,
    /// Something may have changed on disk since everything was last known durable (a
    /// clean open or close): when false, `close` has nothing to fsync.
    changed: AtomicBool,
    /// Bytes written to segments since open, and how many of them the last fsync
    /// covered: the difference is the size of the next fsync (`nagare_log_fsync_size_bytes`).
    written: AtomicU64,
    synced_written: AtomicU64,
    /// Held by a compaction pass (`compact.rs`), so two never run on one log.
    cleaning: Mutex<()>,
    /// Segment size, age and index interval, changeable while the log is open.
    rolls: roll_settings::RollSettings,
    /// Open transactions (see `txn`).
    txn: Mutex<txn::TxnState>,
    /// The last shutdown left the clean-shutdown marker: nothing acknowledged without an
    /// fsync can have been lost since.
    opened_clean: bool,
}

struct Writer {
    active: Arc<Segment>,
    /// When the active segment became active (for age-based rolling).
    active_since: Instant,
    closed: bool,
}

/// The end of the log as readers see it: the end offset and how many bytes of the
/// active segment hold batches below it.
#[derive(Debug, Clone, Copy)]
struct Published {
    end_offset: i64,
    active_base: i64,
    active_size: u64,
    /// The last stable offset: the first offset of the oldest open transaction, else
    /// `end_offset`. Published with the end so a reader never sees a transactional
    /// batch's end without its transaction.
    stable_offset: i64,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> LogError + '_ {
    move |source| LogError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Copies an I/O error so several failed batches can each report it.
fn copy_err(e: &LogError) -> LogError {
    match e {
        LogError::Io { path, source } => LogError::Io {
            path: path.clone(),
            source: match source.raw_os_error() {
                Some(code) => std::io::Error::from_raw_os_error(code),
                None => std::io::Error::new(source.kind(), source.to_string()),
            },
        },
        LogError::Batch(b) => LogError::Batch(b.clone()),
        LogError::OffsetOutOfRange { offset, start, end } => LogError::OffsetOutOfRange {
            offset: *offset,
            start: *start,
            end: *end,
        },
        LogError::Closed => LogError::Closed,
    }
}

impl PartitionLog {
    fn publish(&self, p: Published) {
        *self.published.lock() = p;
    }

    fn published(&self) -> Published {
        *self.published.lock()
    }

    pub fn log_start_offset(&self) -> i64 {
        self.start_offset.load(Ordering::Acquire)
    }
    /// Offset the next appended record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.published().end_offset
    }
    /// Whether the previous process closed this log cleanly (its clean-shutdown marker was
    /// there when it was opened). After a crash, records acknowledged without an fsync may
    /// be gone.
    pub fn opened_clean(&self) -> bool {
        self.opened_clean
    }

    /// Offset up to which (exclusive) appended bytes are known to be fsynced.
    pub fn flushed_offset(&self) -> i64 {
        self.flushed.load(Ordering::Acquire)
    }

    /// Largest batch recovery and re-verification accept.
    fn max_batch(&self) -> usize {
        (self.config.max_batch_bytes as usize).max(RECOVERY_MAX_BATCH)
    }

    /// Records the log start offset (see `write_offset_file`); moved in memory only
    /// once on disk, so the two never disagree after a failure.
    fn set_start_offset(&self, offset: i64) -> Result<(), LogError> {
        self.write_offset_file(LOG_START_FILE, offset)?;
        self.start_offset.store(offset, Ordering::Release);
        Ok(())
    }

    /// Writes a one-number file: to a temporary file, fsynced and renamed over the old
    /// one, so a crash leaves the old value or the new one; the rename is made durable
    /// with the next directory fsync.
    fn write_offset_file(&self, name: &str, offset: i64) -> Result<(), LogError> {
        let tmp = self.dir.join(format!("{name}.tmp"));
        let path = self.dir.join(name);
        let storage = &self.io.storage;
        let f = self
            .io
            .open(&tmp, OpenMode::CreateTruncate)
            .map_err(io_err(&tmp))?;
        storage
            .write_at(&f, &[format!("{offset}\n").as_bytes()], 0)
            .and_then(|()| storage.sync_data(&f))
            .map_err(io_err(&tmp))?;
        drop(f);
        storage.rename(&tmp, &path).map_err(io_err(&path))?;
        self.dir_dirty.store(true, Ordering::Release);
        Ok(())
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    /// Total bytes in all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.read().iter().map(|s| s.size()).sum()
    }

    /// How many segments the log has (the active one included).
    pub fn segment_count(&self) -> usize {
        self.segments.read().len()
    }
}

#[cfg(test)]
mod compact_tests;
#[cfg(test)]
mod fd_budget_tests;
#[cfg(test)]
mod power_loss_tests;
#[cfg(test)]
mod prefill_tests;
#[cfg(test)]
#[path = "tests.rs"]
mod tests;
#[cfg(test)]
mod txn_tests;
