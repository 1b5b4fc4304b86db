//! Durability: fsync with group commit, index persistence, and the clean close that lets
//! the next open skip recovery.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{io_err, PartitionLog, CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE};
use crate::segment::Segment;
use crate::storage::OpenMode;
use crate::LogError;

impl PartitionLog {
    /// Takes the fsync lock. It guards no data, so a panic while it was held leaves
    /// nothing inconsistent behind it: a poisoned lock is simply taken.
    pub(super) fn sync_guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.sync_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Group commit: returns once every offset below `offset` is fsynced. Callers that
    /// arrive while an fsync runs are covered by the next single fsync.
    pub fn sync_to(&self, offset: i64) -> Result<(), LogError> {
        if self.flushed_offset() >= offset {
            return Ok(());
        }
        let _s = self.sync_guard();
        if self.flushed_offset() >= offset {
            return Ok(());
        }
        self.sync_now()
    }

    /// fsyncs everything up to the current end (caller holds the sync lock). The active
    /// segment is read before the rolled list is drained so a concurrent roll cannot
    /// hide a segment holding data below the noted end.
    fn sync_now(&self) -> Result<(), LogError> {
        let started = std::time::Instant::now();
        let written = self.written.load(Ordering::Acquire);
        let synced = self.sync_files();
        // fsyncs are milliseconds: the metric lookups here cost nothing by comparison.
        if synced.is_ok() {
            let bytes = written.saturating_sub(self.synced_written.swap(written, Ordering::AcqRel));
            metrics::counter!("nagare_log_fsyncs_total").increment(1);
            metrics::histogram!("nagare_log_fsync_duration_seconds")
                .record(started.elapsed().as_secs_f64());
            metrics::histogram!("nagare_log_fsync_size_bytes").record(bytes as f64);
        } else {
            metrics::counter!("nagare_log_fsync_errors_total").increment(1);
        }
        synced
    }

    fn sync_files(&self) -> Result<(), LogError> {
        let end = self.published().end_offset;
        let active = self.segments.read().last().cloned();
        let rolled = std::mem::take(&mut *self.unsynced.lock());
        for (i, seg) in rolled.iter().enumerate() {
            if let Err(e) = seg.sync_all_files(self.max_batch()) {
                self.unsynced.lock().extend(rolled[i..].iter().cloned());
                return Err(io_err(&seg.log_path)(e));
            }
        }
        if self.dir_dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = self.io.sync_dir(&self.dir) {
                self.dir_dirty.store(true, Ordering::Release);
                return Err(io_err(&self.dir)(e));
            }
        }
        if let Some(seg) = active {
            if seg.wants_prefill() {
                self.prefill(&seg);
            }
            seg.sync_data(self.max_batch())
                .map_err(io_err(&seg.log_path))?;
            // Every segment before the active one is now fsynced: after a roll, move the
            // recovery point so an unclean restart checks only from here.
            // The open transactions as of that base, before the recovery point that
            // makes an unclean restart rescan only from there.
            if seg.base > self.recovery_point.load(Ordering::Acquire)
                && seg.base != self.no_checkpoint_at.load(Ordering::Acquire)
            {
                if self.checkpoint_transactions_at(seg.base)? {
                    self.write_offset_file(RECOVERY_POINT_FILE, seg.base)?;
                    self.recovery_point.store(seg.base, Ordering::Release);
                } else {
                    self.no_checkpoint_at.store(seg.base, Ordering::Release);
                }
            }
        }
        self.flushed.fetch_max(end, Ordering::AcqRel);
        Ok(())
    }

    /// Writes zeros ahead of the active segment's end (see `Segment::prefill`), unless
    /// an append holds the writer lock right now: the fsync thread takes the sync lock
    /// before the writer lock here, the reverse of `close`, so it never waits for it.
    fn prefill(&self, seg: &Arc<Segment>) {
        let Some(w) = self.writer.try_lock() else {
            return;
        };
        if w.closed || !Arc::ptr_eq(&w.active, seg) {
            return;
        }
        seg.prefill();
    }

    /// fsyncs everything appended so far, indexes included.
    pub fn flush(&self) -> Result<(), LogError> {
        let active = self.writer.lock().active.clone();
        self.persist_indexes(&active, false)?;
        let _s = self.sync_guard();
        self.sync_now()
    }

    fn persist_indexes(&self, seg: &Segment, finalize: bool) -> Result<(), LogError> {
        let mut idx = seg.idx.write();
        if finalize {
            idx.maybe_add_time_entry(seg.base);
        }
        idx.persist(&self.io, &seg.index_path, &seg.time_path)
            .map_err(io_err(&seg.index_path))?;
        seg.persist_txns().map_err(io_err(&seg.txn_path))
    }

    /// Flushes and writes the clean-shutdown marker; the log refuses appends afterwards.
    ///
    /// A log with nothing changed since it was opened clean is already durable and is
    /// not fsynced again (10,000 idle partitions close without 50,000 fsyncs). The marker
    /// itself is neither fsynced nor made durable with a directory fsync: it is created
    /// only after everything it vouches for is durable, and losing it in a crash only
    /// costs a recovery scan at the next open.
    pub fn close(&self) -> Result<(), LogError> {
        let mut w = self.writer.lock();
        if w.closed {
            return Ok(());
        }
        // A file that ends at its last batch lets the next open check its tail.
        w.active.trim_prefill();
        if self.changed.load(Ordering::Acquire) {
            self.persist_indexes(&w.active, true)?;
            {
                let _s = self.sync_guard();
                self.sync_now()?;
            }
            w.active
                .sync_all_files(self.max_batch())
                .map_err(io_err(&w.active.index_path))?;
            self.checkpoint_transactions_at_end()?;
            self.changed.store(false, Ordering::Release);
        }
        let marker = self.dir.join(CLEAN_SHUTDOWN_FILE);
        self.io
            .open(&marker, OpenMode::CreateTruncate)
            .map_err(io_err(&marker))?;
        w.closed = true;
        Ok(())
    }
}
