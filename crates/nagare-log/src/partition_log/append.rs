//! Appending: validate each batch, assign its offsets, write runs of batches with one
//! vectored write, and roll to a new segment when the active one is full or old.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::txn::written_batch;
use super::{copy_err, io_err, AppendInfo, PartitionLog, Published, Writer};
use crate::batch;
use crate::segment::Segment;
use crate::LogError;

impl PartitionLog {
    fn needs_roll(&self, w: &Writer, pending: u64, len: u64, last_offset: i64) -> bool {
        let size = w.active.size() + pending;
        size > 0
            && (size + len > self.segment_bytes()
                || w.active_since.elapsed() >= self.segment_age()
                || last_offset - w.active.base > i32::MAX as i64)
    }

    /// Makes a new active segment starting at the current end offset.
    pub(super) fn roll(&self, w: &mut Writer) -> Result<(), LogError> {
        let old = w.active.clone();
        {
            let mut idx = old.idx.write();
            idx.maybe_add_time_entry(old.base);
            idx.persist(&self.io, &old.index_path, &old.time_path)
                .map_err(io_err(&old.index_path))?;
        }
        // A rolled segment never grows again: its file ends at its last batch.
        old.trim_prefill();
        let end = self.published().end_offset;
        let new = Arc::new(Segment::create(&self.io, &self.dir, end).map_err(io_err(&self.dir))?);
        self.unsynced.lock().push(old);
        // The new file's directory entry becomes durable with the directory fsync that
        // `sync_now` runs before anything in the segment is reported durable.
        self.dir_dirty.store(true, Ordering::Release);
        self.changed.store(true, Ordering::Release);
        self.snapshot_transactions(end);
        self.segments.write().push(new.clone());
        w.active = new;
        w.active_since = Instant::now();
        let stable_offset = self.published().stable_offset;
        self.publish(Published {
            end_offset: end,
            active_base: end,
            active_size: 0,
            stable_offset,
        });
        Ok(())
    }

    /// Validates one record batch, assigns its offsets (rewriting the base offset in
    /// `batch`) and appends it to the active segment. Does not fsync.
    pub fn append(&self, batch: &mut [u8]) -> Result<AppendInfo, LogError> {
        self.append_many(&mut [batch])
            .pop()
            .unwrap_or(Err(LogError::Closed))
    }

    /// Appends several batches under one lock with one write; each gets its own result
    /// (an invalid batch is refused without affecting the others).
    pub fn append_many(&self, batches: &mut [&mut [u8]]) -> Vec<Result<AppendInfo, LogError>> {
        let mut w = self.writer.lock();
        self.changed.store(true, Ordering::Release);
        let mut results: Vec<Result<AppendInfo, LogError>> = Vec::with_capacity(batches.len());
        if w.closed {
            results.extend(batches.iter().map(|_| Err(LogError::Closed)));
            return results;
        }
        let max = self.config.max_batch_bytes as usize;
        let mut next = self.published().end_offset;
        // Accepted batches not yet written to the active segment: (index, info).
        let mut run: Vec<(usize, AppendInfo)> = Vec::new();
        let mut run_bytes = 0u64;
        let mut failed: Option<LogError> = None;
        for i in 0..batches.len() {
            if let Some(e) = &failed {
                results.push(Err(copy_err(e)));
                continue;
            }
            let header = match batch::validate(batches[i], max) {
                Ok(h) => h,
                Err(e) => {
                    results.push(Err(e.into()));
                    continue;
                }
            };
            let len = batches[i].len() as u64;
            let last = next + header.last_offset_delta as i64;
            if self.needs_roll(&w, run_bytes, len, last) {
                // Batches already written stay written (and acknowledged) even if the
                // roll after them fails; only this batch and later ones fail.
                let written = self.write_run(&mut w, batches, &run, next);
                if let Err(e) = &written {
                    for &(j, _) in &run {
                        results[j] = Err(copy_err(e));
                    }
                }
                run.clear();
                if let Err(e) = written.and_then(|()| self.roll(&mut w)) {
                    results.push(Err(copy_err(&e)));
                    failed = Some(e);
                    continue;
                }
                run_bytes = 0;
            }
            batch::set_base_offset(batches[i], next);
            let info = AppendInfo {
                base_offset: next,
                last_offset: last,
                max_timestamp: header.max_timestamp,
                record_count: header.record_count as u32,
            };
            run.push((i, info));
            results.push(Ok(info));
            run_bytes += len;
            next = last + 1;
        }
        if failed.is_none() {
            if let Err(e) = self.write_run(&mut w, batches, &run, next) {
                for &(j, _) in &run {
                    results[j] = Err(copy_err(&e));
                }
            }
        }
        results
    }

    /// Writes accepted batches to the active segment with one vectored write, updates its
    /// indexes and then publishes the new end.
    fn write_run(
        &self,
        w: &mut Writer,
        batches: &[&mut [u8]],
        run: &[(usize, AppendInfo)],
        next: i64,
    ) -> Result<(), LogError> {
        if run.is_empty() {
            return Ok(());
        }
        let seg = &w.active;
        let bufs: Vec<&[u8]> = run.iter().map(|&(i, _)| &*batches[i]).collect();
        seg.write(&bufs).map_err(io_err(&seg.log_path))?;
        let mut position = seg.size();
        {
            let mut idx = seg.idx.write();
            for (&(_, info), b) in run.iter().zip(&bufs) {
                idx.on_append(
                    seg.base,
                    position,
                    b.len() as u64,
                    info.last_offset,
                    info.max_timestamp,
                    self.index_interval(),
                );
                position += b.len() as u64;
            }
        }
        seg.set_size(position);
        let added: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        self.written.fetch_add(added, Ordering::Relaxed);
        let stable_offset =
            self.track_transactions(seg, bufs.iter().filter_map(|b| written_batch(b)), next);
        self.publish(Published {
            end_offset: next,
            active_base: seg.base,
            active_size: position,
            stable_offset,
        });
        Ok(())
    }

    /// Rolls the active segment if it is too big or too old (called periodically too).
    pub fn maybe_roll(&self) -> Result<bool, LogError> {
        let mut w = self.writer.lock();
        if w.closed || w.active.size() == 0 {
            return Ok(false);
        }
        if w.active.size() >= self.segment_bytes() || w.active_since.elapsed() >= self.segment_age()
        {
            self.roll(&mut w)?;
            return Ok(true);
        }
        Ok(false)
    }
}
