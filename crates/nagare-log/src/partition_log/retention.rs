//! Retention: delete whole old segments past the size and time limits, or before an
//! offset (DeleteRecords), moving the log start offset.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{io_err, PartitionLog};
use crate::segment::Segment;
use crate::LogError;

impl PartitionLog {
    /// Removes the first `count` segments (never the active one) and moves the start.
    fn delete_prefix(&self, count: usize) -> Result<usize, LogError> {
        let first_base = {
            let segs = self.segments.read();
            let count = count.min(segs.len().saturating_sub(1));
            if count == 0 {
                return Ok(0);
            }
            segs[count].base
        };
        // The new start is made durable before any file goes: a power cut may keep a
        // later removal and lose an earlier one, and recovery tells such a leftover
        // (wholly below the durable start) from a segment whose tail was lost.
        if first_base > self.log_start_offset() {
            self.set_start_offset(first_base)?;
        }
        self.io.sync_dir(&self.dir).map_err(io_err(&self.dir))?;
        let removed: Vec<Arc<Segment>> = {
            let mut segs = self.segments.write();
            let count = segs.partition_point(|s| s.base < first_base);
            segs.drain(..count).collect()
        };
        self.unsynced.lock().retain(|s| s.base >= first_base);
        for s in &removed {
            tracing::debug!(segment = %s.log_path.display(), "deleting old segment");
            s.delete_files();
        }
        self.dir_dirty.store(true, Ordering::Release);
        self.changed.store(true, Ordering::Release);
        Ok(removed.len())
    }

    /// Deletes whole old segments past the size and time limits; returns how many.
    pub fn apply_retention(&self, now_ms: i64) -> Result<usize, LogError> {
        self.apply_retention_limits(now_ms, self.config.retention, self.config.retention_bytes)
    }

    /// [`apply_retention`](Self::apply_retention) with limits other than the ones the
    /// log was opened with (a topic's settings changed since).
    pub fn apply_retention_limits(
        &self,
        now_ms: i64,
        retention: Option<std::time::Duration>,
        retention_bytes: Option<u64>,
    ) -> Result<usize, LogError> {
        let _w = self.writer.lock();
        let segs = self.segments.read().clone();
        let candidates = &segs[..segs.len().saturating_sub(1)];
        let mut count = 0;
        if let Some(retention) = retention {
            let cutoff = now_ms.saturating_sub(retention.as_millis() as i64);
            count = candidates
                .iter()
                .take_while(|s| segment_time(s) < cutoff)
                .count();
        }
        if let Some(limit) = retention_bytes {
            let total: u64 = segs[count..].iter().map(|s| s.size()).sum();
            let mut excess = total.saturating_sub(limit);
            for s in &candidates[count..] {
                if excess < s.size() {
                    break;
                }
                excess -= s.size();
                count += 1;
            }
        }
        self.delete_prefix(count)
    }

    /// Deletes every segment before the one holding `offset` and moves the log start.
    pub fn delete_records_before(&self, offset: i64) -> Result<(), LogError> {
        let _w = self.writer.lock();
        self.changed.store(true, Ordering::Release);
        let end = self.published().end_offset;
        let start = self.log_start_offset();
        if offset > end {
            return Err(LogError::OffsetOutOfRange { offset, start, end });
        }
        if offset <= start {
            return Ok(());
        }
        let count = {
            let segs = self.segments.read();
            segs.windows(2).take_while(|w| w[1].base <= offset).count()
        };
        self.delete_prefix(count)?;
        if offset > self.log_start_offset() {
            self.set_start_offset(offset)?;
        }
        Ok(())
    }
}

/// The newest record time of a segment for time retention: its max timestamp, or the
/// file's modification time when it holds no timestamps.
fn segment_time(seg: &Segment) -> i64 {
    if let Some((ts, _)) = seg.idx.read().max_timestamp {
        if ts >= 0 {
            return ts;
        }
    }
    seg.file()
        .and_then(|f| f.metadata())
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(i64::MAX, |d| d.as_millis() as i64)
}
