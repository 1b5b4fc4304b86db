use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::{LogConfig, LogError};

/// Where an appended batch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    /// Largest record timestamp of the batch.
    pub max_timestamp: i64,
    pub record_count: u32,
}

/// A byte range of a segment file holding whole batches, for `sendfile(2)`.
#[derive(Debug, Clone)]
pub struct FileSlice {
    pub file: Arc<File>,
    pub position: u64,
    pub len: u32,
}

/// What a read returned: whole batches starting with the one holding the requested
/// offset, plus the partition's offsets at the time of the read.
#[derive(Debug, Clone, Default)]
pub struct ReadResult {
    pub slices: Vec<FileSlice>,
    pub total_bytes: u64,
    pub log_start_offset: i64,
    pub high_watermark: i64,
}

/// One partition's log: a directory of segments. See the crate docs.
pub struct PartitionLog {
    _private: (),
}

impl PartitionLog {
    /// Opens (creating if needed) the log in `dir`, recovering the tail when the last
    /// shutdown was not clean.
    pub fn open(dir: &Path, config: LogConfig) -> Result<PartitionLog, LogError> {
        let _ = (dir, config);
        todo!()
    }

    /// Validates one record batch, assigns its offsets (rewriting the base offset in
    /// `batch`) and appends it to the active segment. Does not fsync.
    pub fn append(&self, batch: &mut [u8]) -> Result<AppendInfo, LogError> {
        let _ = batch;
        todo!()
    }

    /// Appends several batches under one lock with one write; each gets its own result
    /// (an invalid batch is refused without affecting the others).
    pub fn append_many(&self, batches: &mut [&mut [u8]]) -> Vec<Result<AppendInfo, LogError>> {
        let _ = batches;
        todo!()
    }

    /// Whole batches from the one containing `offset`, up to about `max_bytes` (at least
    /// one batch is returned even if larger). `offset == log_end_offset` returns nothing;
    /// outside [log_start_offset, log_end_offset] is `OffsetOutOfRange`.
    pub fn read(&self, offset: i64, max_bytes: u64) -> Result<ReadResult, LogError> {
        let _ = (offset, max_bytes);
        todo!()
    }

    /// Same as `read` but copies the batches into memory, one `Bytes` per batch.
    pub fn read_batches(&self, offset: i64, max_bytes: u64) -> Result<Vec<Bytes>, LogError> {
        let _ = (offset, max_bytes);
        todo!()
    }

    pub fn log_start_offset(&self) -> i64 {
        todo!()
    }
    /// Offset the next appended record will get.
    pub fn log_end_offset(&self) -> i64 {
        todo!()
    }
    /// Offset up to which (exclusive) appended bytes are known to be fsynced.
    pub fn flushed_offset(&self) -> i64 {
        todo!()
    }
    /// Largest record timestamp in the log and the offset of its batch's last record.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        todo!()
    }
    /// First offset whose batch max timestamp is >= `timestamp`, with that timestamp.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Option<(i64, i64)> {
        let _ = timestamp;
        todo!()
    }

    /// Group commit: returns once every offset below `offset` is fsynced. Callers that
    /// arrive while an fsync runs are covered by the next single fsync.
    pub fn sync_to(&self, offset: i64) -> Result<(), LogError> {
        let _ = offset;
        todo!()
    }
    /// fsyncs everything appended so far.
    pub fn flush(&self) -> Result<(), LogError> {
        todo!()
    }
    /// Rolls the active segment if it is too big or too old (called periodically too).
    pub fn maybe_roll(&self) -> Result<bool, LogError> {
        todo!()
    }
    /// Drops every record at or after `offset`.
    pub fn truncate_to(&self, offset: i64) -> Result<(), LogError> {
        let _ = offset;
        todo!()
    }
    /// Deletes whole old segments past the size and time limits; returns how many.
    pub fn apply_retention(&self, now_ms: i64) -> Result<usize, LogError> {
        let _ = now_ms;
        todo!()
    }
    /// Deletes every segment before the one holding `offset` and moves the log start.
    pub fn delete_records_before(&self, offset: i64) -> Result<(), LogError> {
        let _ = offset;
        todo!()
    }
    /// Flushes and writes the clean-shutdown marker; the log refuses appends afterwards.
    pub fn close(&self) -> Result<(), LogError> {
        todo!()
    }
    pub fn config(&self) -> &LogConfig {
        todo!()
    }
    /// Total bytes in all segments.
    pub fn size_bytes(&self) -> u64 {
        todo!()
    }
}
