//! Log compaction of one partition (the algorithm is described in `crate::cleaner`):
//! planning a pass, building the offset map, copying segments group by group and
//! swapping the results in. The file side (chunked reads, the segment being written,
//! recovering an interrupted swap) is `compact_files`.

use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

pub(crate) use super::compact_files::recover_swaps;
use super::compact_files::{each_batch, remove_if_there, Output, CLEANED_SUFFIX, SWAP_SUFFIX};
use super::{io_err, PartitionLog};
use crate::batch::{BatchHeader, HEADER_LEN};
use crate::cleaner::checkpoint::{self, Checkpoint};
use crate::cleaner::filter::{self, Filtered};
use crate::cleaner::marker::{self, Dataless, TxnTracker};
use crate::cleaner::{CleanStats, Cleanability, Cleaner, CompactionConfig};
use crate::segment::{file_stem, Segment};
use crate::storage::OpenMode;
use crate::txn_index::AbortedTxnEntry;
use crate::LogError;

/// What every group of one pass shares.
struct Pass<'a> {
    /// Aborted transactions over the cleaned range.
    aborted: &'a [AbortedTxnEntry],
    /// Offsets from here on are past the offset map: copied, not compacted.
    map_end: i64,
    /// Tombstones below this offset have been clean for `delete.retention.ms`.
    tombstone_horizon: i64,
    now_ms: i64,
    delete_retention_ms: i64,
    /// Which transactions still have data, from the log start on.
    txns: TxnTracker,
    /// The earliest time a marker or tombstone kept by this pass may go.
    next_horizon: Option<i64>,
}

impl Pass<'_> {
    fn due_at(&mut self, t: i64) {
        self.next_horizon = Some(self.next_horizon.map_or(t, |h| h.min(t)));
    }
}

/// The part of the log a pass may look at.
struct DirtyRange {
    /// Snapshot of the segments.
    segs: Vec<Arc<Segment>>,
    first_dirty: i64,
    /// `segs[dirty_idx..uncleanable_idx]` are the dirty, cleanable segments.
    dirty_idx: usize,
    uncleanable_idx: usize,
}

#[cfg(test)]
thread_local! {
    /// Test hook: the clean fails ("crashes") at this step of the swap.
    pub(crate) static CRASH_AT: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

fn crash_point(_step: u8) -> std::io::Result<()> {
    #[cfg(test)]
    if CRASH_AT.with(|c| c.get()) == _step {
        return Err(std::io::Error::other(format!(
            "simulated crash at step {_step}"
        )));
    }
    Ok(())
}

impl PartitionLog {
    /// How much of the log is dirty and whether a pass is overdue.
    pub fn cleanability(&self, config: &CompactionConfig, now_ms: i64) -> Cleanability {
        let r = self.dirty_range(config, now_ms);
        let size = |s: &[Arc<Segment>]| s.iter().map(|s| s.size()).sum::<u64>();
        let dirty = &r.segs[r.dirty_idx..r.uncleanable_idx];
        let overdue = config.max_compaction_lag_ms < i64::MAX
            && dirty.first().is_some_and(|s| {
                first_timestamp(s)
                    .is_some_and(|ts| ts < now_ms.saturating_sub(config.max_compaction_lag_ms))
            });
        Cleanability {
            clean_bytes: size(&r.segs[..r.dirty_idx]),
            dirty_bytes: size(dirty),
            overdue,
            horizon_due: self.read_checkpoint().horizon.is_some_and(|t| t <= now_ms),
        }
    }

    /// Rolls the active segment (when it holds anything), so everything written so far
    /// becomes cleanable. Returns whether it rolled.
    pub fn roll_for_cleaning(&self) -> Result<bool, LogError> {
        let mut w = self.writer.lock();
        if w.closed || w.active.size() == 0 {
            return Ok(false);
        }
        self.roll(&mut w)?;
        Ok(true)
    }

    /// `max.compaction.lag.ms` on a partition that stopped receiving writes: rolls the
    /// active segment once its first record is older than the lag, so those records
    /// become cleanable and get compacted within the lag (Kafka rolls compacted logs at
    /// `min(segment.ms, max.compaction.lag.ms)` for the same reason). Returns whether it
    /// rolled.
    pub fn roll_if_compaction_overdue(
        &self,
        config: &CompactionConfig,
        now_ms: i64,
    ) -> Result<bool, LogError> {
        if config.max_compaction_lag_ms == i64::MAX {
            return Ok(false);
        }
        let mut w = self.writer.lock();
        if w.closed || w.active.size() == 0 {
            return Ok(false);
        }
        let cutoff = now_ms.saturating_sub(config.max_compaction_lag_ms);
        if first_timestamp(&w.active).is_none_or(|ts| ts >= cutoff) {
            return Ok(false);
        }
        self.roll(&mut w)?;
        Ok(true)
    }

    /// The first offset not yet compacted.
    pub fn first_dirty_offset(&self) -> i64 {
        self.read_checkpoint().dirty.max(self.log_start_offset())
    }

    fn dirty_range(&self, config: &CompactionConfig, now_ms: i64) -> DirtyRange {
        let segs = self.segments.read().clone();
        let active_base = self.published().active_base;
        let first_dirty = self
            .read_checkpoint()
            .dirty
            .max(self.log_start_offset())
            .max(segs.first().map_or(0, |s| s.base));
        let dirty_idx = segs
            .partition_point(|s| s.base <= first_dirty)
            .saturating_sub(1);
        let lag_cutoff = now_ms.saturating_sub(config.min_compaction_lag_ms.max(0));
        // Nothing at or past the last stable offset: an open transaction may still abort.
        let lso = self.last_stable_offset();
        let mut uncleanable_idx = dirty_idx;
        while uncleanable_idx < segs.len() {
            let s = &segs[uncleanable_idx];
            let young = config.min_compaction_lag_ms > 0
                && s.idx
                    .read()
                    .max_timestamp
                    .is_some_and(|(ts, _)| ts > lag_cutoff);
            let unstable = segs.get(uncleanable_idx + 1).is_none_or(|n| n.base > lso);
            if s.base >= active_base || young || unstable {
                break;
            }
            uncleanable_idx += 1;
        }
        DirtyRange {
            segs,
            first_dirty,
            dirty_idx,
            uncleanable_idx,
        }
    }

    fn read_checkpoint(&self) -> Checkpoint {
        let path = self.dir.join(checkpoint::FILE);
        match self.io.read_opt(&path) {
            Ok(Some(bytes)) => Checkpoint::parse(&String::from_utf8_lossy(&bytes)),
            _ => Checkpoint::default(),
        }
    }

    /// Replaces the checkpoint atomically (temporary file, fsync, rename).
    fn write_checkpoint(&self, c: &Checkpoint) -> Result<(), LogError> {
        let tmp = self.dir.join(format!("{}.tmp", checkpoint::FILE));
        let path = self.dir.join(checkpoint::FILE);
        let storage = &self.io.storage;
        let f = self
            .io
            .open(&tmp, OpenMode::CreateTruncate)
            .map_err(io_err(&tmp))?;
        storage
            .write_at(&f, &[c.render().as_bytes()], 0)
            .and_then(|()| storage.sync_data(&f))
            .map_err(io_err(&tmp))?;
        drop(f);
        storage.rename(&tmp, &path).map_err(io_err(&path))?;
        self.dir_dirty.store(true, Ordering::Release);
        Ok(())
    }

    /// One compaction pass (see `crate::cleaner`). Does nothing when no segment is
    /// cleanable; the caller decides whether a pass is due (`cleanability`).
    pub fn clean(
        &self,
        cleaner: &mut Cleaner,
        config: &CompactionConfig,
        now_ms: i64,
    ) -> Result<CleanStats, LogError> {
        let _one = self.cleaning.lock();
        let started = Instant::now();
        let slept_before = cleaner.throttle.slept;
        let r = self.dirty_range(config, now_ms);
        let mut stats = CleanStats {
            cleaned_up_to: r.first_dirty,
            ..CleanStats::default()
        };
        let mut ckpt = self.read_checkpoint();
        // A marker or tombstone in the clean section reached its delete horizon: a pass
        // is due even with nothing dirty (Kafka's cleaner picks such logs too), else a
        // partition nobody writes to would keep them forever.
        let horizon_due = ckpt.horizon.is_some_and(|t| t <= now_ms);
        let dirty = r.dirty_idx < r.uncleanable_idx;
        if !dirty && !horizon_due {
            return Ok(stats);
        }
        // Aborted transactional data neither counts as the latest record of a key nor
        // survives the copy (as in Kafka); the markers stay.
        let upto = r
            .segs
            .get(r.uncleanable_idx)
            .map_or_else(|| self.log_end_offset(), |s| s.base);
        let aborted = self.aborted_transactions(self.log_start_offset(), upto);
        let map_end = if dirty {
            self.build_map(cleaner, &r, &aborted, &mut stats)?
        } else {
            // Only the clean section is copied: no key is newer than its records.
            cleaner.map.clear();
            r.first_dirty
        };
        stats.cleaned_up_to = map_end;
        stats.map_entries = cleaner.map.len();
        if map_end <= r.first_dirty && !horizon_due {
            return Ok(stats);
        }
        let horizon = ckpt.tombstone_horizon(now_ms, config.delete_retention_ms);
        // Every segment holding offsets below the map's end, grouped to fit a segment.
        let n = r
            .segs
            .partition_point(|s| s.base < map_end)
            .min(r.uncleanable_idx);
        let max_group = self.segment_bytes();
        let mut pass = Pass {
            aborted: &aborted,
            map_end,
            tombstone_horizon: horizon,
            now_ms,
            delete_retention_ms: config.delete_retention_ms,
            txns: TxnTracker::default(),
            next_horizon: None,
        };
        let mut i = 0;
        while i < n {
            let mut j = i + 1;
            let mut size = r.segs[i].size();
            while j < n && size + r.segs[j].size() <= max_group {
                size += r.segs[j].size();
                j += 1;
            }
            let group = &r.segs[i..j];
            if !self.clean_group(group, cleaner, &mut pass, &mut stats)? {
                // Retention or truncation changed the segments meanwhile: stop here
                // without moving the checkpoint; the next pass starts over.
                return Ok(stats);
            }
            i = j;
        }
        ckpt.record_pass(map_end, now_ms);
        ckpt.horizon = pass.next_horizon;
        self.write_checkpoint(&ckpt)?;
        self.changed.store(true, Ordering::Release);
        stats.elapsed = started.elapsed();
        stats.throttled = cleaner.throttle.slept.saturating_sub(slept_before);
        Ok(stats)
    }

    /// Maps every key of the dirty section to its latest offset, until the map is full;
    /// returns the offset the map covers up to (exclusive).
    fn build_map(
        &self,
        cleaner: &mut Cleaner,
        r: &DirtyRange,
        aborted: &[AbortedTxnEntry],
        stats: &mut CleanStats,
    ) -> Result<i64, LogError> {
        let map = &mut cleaner.map;
        map.clear();
        let first_dirty = r.first_dirty;
        let mut full_at: Option<i64> = None;
        for seg in &r.segs[r.dirty_idx..r.uncleanable_idx] {
            let limit = seg.size();
            let from = if seg.base < first_dirty {
                match seg
                    .find(first_dirty, limit)
                    .map_err(io_err(&seg.log_path))?
                {
                    Some((pos, _)) => pos,
                    None => continue,
                }
            } else {
                0
            };
            let file = seg.file().map_err(io_err(&seg.log_path))?;
            each_batch(
                &file,
                &seg.log_path,
                from,
                limit,
                &mut cleaner.throttle,
                |_, h, bytes| {
                    stats.bytes_read += bytes.len() as u64;
                    if h.is_control() || h.last_offset() < first_dirty || is_aborted(aborted, h) {
                        return Ok(true);
                    }
                    let mut result = Ok(());
                    filter::for_each_record(bytes, h, |rec| {
                        stats.records_read += 1;
                        if full_at.is_some() || rec.offset < first_dirty {
                            return;
                        }
                        if let Some(key) = rec.key {
                            if !map.put(key, rec.offset) {
                                full_at = Some(rec.offset);
                            }
                        }
                    })
                    .unwrap_or_else(|e| result = Err(e));
                    result?;
                    Ok(full_at.is_none())
                },
            )?;
            if let Some(at) = full_at {
                stats.map_full = true;
                return Ok(at);
            }
        }
        // The whole dirty section fits: the map covers up to the first uncleanable
        // segment (holes at the end of the last dirty one included).
        Ok(r.segs
            .get(r.uncleanable_idx)
            .map_or_else(|| self.log_end_offset(), |s| s.base))
    }

    /// Copies one group of segments into one new segment and swaps it in. Returns false
    /// when the group no longer matches the log (nothing changed then).
    fn clean_group(
        &self,
        group: &[Arc<Segment>],
        cleaner: &mut Cleaner,
        pass: &mut Pass<'_>,
        stats: &mut CleanStats,
    ) -> Result<bool, LogError> {
        let base = group[0].base;
        let stem = file_stem(base);
        let cleaned = self.dir.join(format!("{stem}{CLEANED_SUFFIX}"));
        let swap = self.dir.join(format!("{stem}{SWAP_SUFFIX}"));
        let mut out = Output::create(&self.io, &cleaned, base, self.index_interval())?;
        // The last batch of the group as it was, to end the new segment at the same offset.
        let mut last_original: Option<(BatchHeader, [u8; HEADER_LEN])> = None;
        // ABORT markers dropped here: (producer id, offset), whose index entries go too.
        let mut dropped_aborts: Vec<(i64, i64)> = Vec::new();
        let map = &cleaner.map;
        for seg in group {
            let file = seg.file().map_err(io_err(&seg.log_path))?;
            stats.bytes_before += seg.size();
            each_batch(
                &file,
                &seg.log_path,
                0,
                seg.size(),
                &mut cleaner.throttle,
                |_, h, bytes| {
                    stats.bytes_read += bytes.len() as u64;
                    let mut head = [0u8; HEADER_LEN];
                    head.copy_from_slice(&bytes[..HEADER_LEN]);
                    last_original = Some((*h, head));
                    if h.is_control() {
                        return copy_marker(pass, &mut out, bytes, h, &mut dropped_aborts, stats);
                    }
                    let txn = (h.is_transactional() && h.producer_id >= 0).then_some(h.producer_id);
                    if h.record_count == 0 {
                        // Emptied by an earlier pass: the group end gets one if needed.
                        return Ok(true);
                    }
                    // Batches past the map are not compacted in this pass.
                    if h.base_offset >= pass.map_end {
                        if let Some(p) = txn {
                            pass.txns.on_data(p, true);
                        }
                        return out.write(bytes, h);
                    }
                    if is_aborted(pass.aborted, h) {
                        stats.records_removed += h.record_count.max(0) as u64;
                        return Ok(true);
                    }
                    let mut tombstones = 0u64;
                    let mut kept_tombstone = false;
                    let filtered = filter::filter_batch(bytes, h, |rec| {
                        if rec.offset >= pass.map_end {
                            return true;
                        }
                        let Some(key) = rec.key else {
                            return false;
                        };
                        if map.get(key).is_some_and(|latest| latest > rec.offset) {
                            return false;
                        }
                        if rec.tombstone {
                            if rec.offset < pass.tombstone_horizon {
                                tombstones += 1;
                                return false;
                            }
                            kept_tombstone = true;
                        }
                        true
                    })?;
                    stats.tombstones_removed += tombstones;
                    if kept_tombstone {
                        // Clean as of this pass at the latest: gone a retention later.
                        pass.due_at(pass.now_ms.saturating_add(pass.delete_retention_ms));
                    }
                    if let Some(p) = txn {
                        pass.txns.on_data(p, !matches!(filtered, Filtered::Empty));
                    }
                    match filtered {
                        Filtered::Unchanged => out.write(bytes, h),
                        Filtered::Rebuilt(b) => {
                            let nh = filter::header(&b)?;
                            stats.records_removed += (h.record_count - nh.record_count) as u64;
                            out.write(&b, &nh)
                        }
                        Filtered::Empty => {
                            stats.records_removed += h.record_count.max(0) as u64;
                            Ok(true)
                        }
                    }
                },
            )?;
        }
        if let Some((h, head)) = &last_original {
            if out.last_offset < h.last_offset() {
                let e = filter::empty_batch(head, h);
                let eh = filter::header(&e)?;
                out.write(&e, &eh)?;
            }
        }
        let (written, idx) = out.finish()?;
        cleaner.throttle.consume(written);
        stats.bytes_written += written;
        stats.bytes_after += written;

        // The new segment is durable: make it the swap file (the commit point).
        let storage = &self.io.storage;
        crash_point(1).map_err(io_err(&cleaned))?;
        storage.rename(&cleaned, &swap).map_err(io_err(&swap))?;
        self.io.sync_dir(&self.dir).map_err(io_err(&self.dir))?;
        crash_point(2).map_err(io_err(&swap))?;
        {
            let _w = self.writer.lock();
            let mut segs = self.segments.write();
            let Some(at) = segs.iter().position(|s| Arc::ptr_eq(s, &group[0])) else {
                let _ = storage.remove_file(&swap);
                return Ok(false);
            };
            let same = segs.len() >= at + group.len()
                && segs[at..at + group.len()]
                    .iter()
                    .zip(group)
                    .all(|(a, b)| Arc::ptr_eq(a, b));
            if !same || segs.len() == at + group.len() {
                let _ = storage.remove_file(&swap);
                return Ok(false);
            }
            // Old indexes first, so a crash never pairs them with the new file.
            for p in [
                &group[0].index_path,
                &group[0].time_path,
                &group[0].txn_path,
            ] {
                remove_if_there(&self.io, p)?;
            }
            crash_point(3).map_err(io_err(&swap))?;
            for s in &group[1..] {
                s.delete_files();
            }
            crash_point(4).map_err(io_err(&swap))?;
            storage
                .rename(&swap, &group[0].log_path)
                .map_err(io_err(&swap))?;
            crash_point(5).map_err(io_err(&swap))?;
            let seg =
                Segment::open(&self.io, &self.dir, base).map_err(io_err(&group[0].log_path))?;
            {
                let mut new_idx = seg.idx.write();
                *new_idx = idx;
                new_idx
                    .rewrite(&self.io, &seg.index_path, &seg.time_path)
                    .map_err(io_err(&seg.index_path))?;
            }
            // The aborted-transaction entries of the replaced segments carry over (their
            // data is gone; the entries only answer what readers may still ask).
            // Those of dropped ABORT markers go with them.
            let entries: Vec<AbortedTxnEntry> = group
                .iter()
                .flat_map(|g| g.txns.read().entries.clone())
                .filter(|e| !dropped_aborts.contains(&(e.producer_id, e.last_offset)))
                .collect();
            if !entries.is_empty() {
                crate::txn_index::rewrite(&self.io, &seg.txn_path, &entries)
                    .map_err(io_err(&seg.txn_path))?;
            }
            {
                let mut t = seg.txns.write();
                t.persisted = entries.len();
                t.entries = entries;
            }
            segs.splice(at..at + group.len(), [Arc::new(seg)]);
            self.unsynced
                .lock()
                .retain(|s| !group.iter().any(|g| Arc::ptr_eq(s, g)));
        }
        self.io.sync_dir(&self.dir).map_err(io_err(&self.dir))?;
        stats.segments_before += group.len();
        stats.segments_after += 1;
        Ok(true)
    }
}

/// Copies, stamps or drops one control batch (see `crate::cleaner::marker`).
fn copy_marker(
    pass: &mut Pass<'_>,
    out: &mut Output,
    bytes: &[u8],
    h: &BatchHeader,
    dropped_aborts: &mut Vec<(i64, i64)>,
    stats: &mut CleanStats,
) -> Result<bool, LogError> {
    let has_data = pass.txns.on_marker(h.producer_id);
    if h.record_count == 0 {
        // An empty control batch ends nothing (Kafka drops those too).
        return Ok(true);
    }
    if has_data || h.base_offset >= pass.map_end {
        return out.write(bytes, h);
    }
    // Other control types (Kafka reserves more) are kept, as Kafka keeps them; so is a
    // marker that does not parse (it is not the cleaner's to judge).
    let Some(m) = crate::control::parse_control(bytes).ok().flatten() else {
        return out.write(bytes, h);
    };
    match marker::dataless(bytes, h, pass.now_ms, pass.delete_retention_ms)? {
        Dataless::Keep => {
            pass.due_at(h.base_timestamp);
            out.write(bytes, h)
        }
        Dataless::Stamp(b) => {
            let nh = filter::header(&b)?;
            pass.due_at(nh.base_timestamp);
            out.write(&b, &nh)
        }
        Dataless::Remove => {
            if !m.commit {
                dropped_aborts.push((h.producer_id, h.base_offset));
            }
            stats.markers_removed += 1;
            Ok(true)
        }
    }
}

/// Whether `h` is a data batch of an aborted transaction.
fn is_aborted(aborted: &[AbortedTxnEntry], h: &BatchHeader) -> bool {
    h.is_transactional()
        && !h.is_control()
        && aborted.iter().any(|e| {
            e.producer_id == h.producer_id
                && e.first_offset <= h.base_offset
                && h.last_offset() < e.last_offset
        })
}

/// The first record timestamp of a segment (its first batch's base timestamp, or its
/// max timestamp when the base one holds a delete horizon instead).
fn first_timestamp(seg: &Segment) -> Option<i64> {
    let mut head = [0u8; HEADER_LEN];
    seg.file().ok()?.read_exact_at(&mut head, 0).ok()?;
    let h = filter::header(&head).ok()?;
    Some(if marker::delete_horizon(&h).is_some() {
        h.max_timestamp
    } else {
        h.base_timestamp
    })
}
