//! Cutting the log back: drop every record from an offset on (whole batches), or start
//! over empty at an offset.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::{io_err, PartitionLog, Published, Writer, RECOVERY_POINT_FILE};
use crate::segment::Segment;
use crate::LogError;

impl PartitionLog {
    /// Drops every record at or after `offset`. A batch holding `offset` is dropped
    /// whole, so the new end offset is that batch's base offset.
    pub fn truncate_to(&self, offset: i64) -> Result<(), LogError> {
        let mut w = self.writer.lock();
        self.changed.store(true, Ordering::Release);
        let _s = self.sync_guard();
        let p = self.published();
        if offset >= p.end_offset {
            return Ok(());
        }
        let start = self.log_start_offset();
        if offset <= start {
            return self.truncate_fully(&mut w, offset);
        }
        let segs = self.segments.read().clone();
        let k = segs.partition_point(|s| s.base <= offset).saturating_sub(1);
        let mut cut = None;
        for (i, seg) in segs.iter().enumerate().skip(k) {
            if let Some((pos, h)) = seg
                .find(offset, seg.size())
                .map_err(io_err(&seg.log_path))?
            {
                cut = Some((i, pos, h.base_offset));
                break;
            }
        }
        let Some((i, pos, new_end)) = cut else {
            return Ok(());
        };
        if new_end <= start {
            return self.truncate_fully(&mut w, new_end);
        }
        let seg = segs[i].clone();
        self.lower_recovery_point(seg.base)?;
        self.publish(Published {
            end_offset: new_end,
            active_base: seg.base,
            active_size: pos,
            stable_offset: p.stable_offset.min(new_end),
        });
        self.flushed.fetch_min(new_end, Ordering::AcqRel);
        let dropped: Vec<Arc<Segment>> = segs[i + 1..].to_vec();
        self.segments.write().truncate(i + 1);
        for d in &dropped {
            d.delete_files();
        }
        self.unsynced.lock().retain(|s| s.base < seg.base);
        if !dropped.is_empty() {
            self.dir_dirty.store(true, Ordering::Release);
        }
        seg.cut(pos).map_err(io_err(&seg.log_path))?;
        seg.rebuild(self.index_interval(), self.max_batch(), false)
            .map_err(io_err(&seg.log_path))?;
        let kept: Vec<Arc<Segment>> = segs[..=i].to_vec();
        let stable_offset = self.rebuild_transactions_after_cut(&kept, new_end)?;
        self.publish(Published {
            end_offset: new_end,
            active_base: seg.base,
            active_size: pos,
            stable_offset,
        });
        if !Arc::ptr_eq(&w.active, &seg) {
            w.active = seg;
            w.active_since = Instant::now();
        }
        Ok(())
    }

    /// Deletes every segment and starts an empty log at `offset`.
    fn truncate_fully(&self, w: &mut Writer, offset: i64) -> Result<(), LogError> {
        let offset = offset.max(0);
        self.lower_recovery_point(offset)?;
        let old: Vec<Arc<Segment>> = std::mem::take(&mut *self.segments.write());
        for s in &old {
            s.delete_files();
        }
        self.unsynced.lock().clear();
        let seg =
            Arc::new(Segment::create(&self.io, &self.dir, offset).map_err(io_err(&self.dir))?);
        self.segments.write().push(seg.clone());
        self.dir_dirty.store(true, Ordering::Release);
        w.active = seg;
        w.active_since = Instant::now();
        self.set_start_offset(offset)?;
        self.rebuild_transactions_after_cut(&[], offset)?;
        self.publish(Published {
            end_offset: offset,
            active_base: offset,
            active_size: 0,
            stable_offset: offset,
        });
        self.flushed.fetch_min(offset, Ordering::AcqRel);
        Ok(())
    }

    /// Segments from `base` on will be rewritten, so an unclean restart must check them.
    fn lower_recovery_point(&self, base: i64) -> Result<(), LogError> {
        if base < self.recovery_point.load(Ordering::Acquire) {
            self.write_offset_file(RECOVERY_POINT_FILE, base)?;
            self.recovery_point.store(base, Ordering::Release);
        }
        Ok(())
    }
}
