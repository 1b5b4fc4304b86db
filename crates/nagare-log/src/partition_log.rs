use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use crate::batch::{self, LOG_OVERHEAD};
use crate::segment::Segment;

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

/// Written by `close()` after everything is fsynced, removed by `open()`: when it is
/// missing at open, the last shutdown was not clean and the tail is recovered.
const CLEAN_SHUTDOWN_FILE: &str = ".nagare_cleanshutdown";
/// The log start offset when `delete_records_before` moved it inside a segment.
const LOG_START_FILE: &str = "log-start-offset";
/// Recovery refuses to read batches claiming more than this (or the configured maximum,
/// if larger), so a corrupt length cannot cause a huge allocation.
const RECOVERY_MAX_BATCH: usize = 64 * 1024 * 1024;

/// One partition's log: a directory of segments. See the crate docs.
pub struct PartitionLog {
    dir: PathBuf,
    config: LogConfig,
    /// Ordered by base offset; the last one is active. Readers hold the read lock while
    /// they locate data; roll, truncation and retention take the write lock.
    segments: RwLock<Vec<Arc<Segment>>>,
    writer: Mutex<Writer>,
    /// What readers may see: updated only after a write completes.
    published: Mutex<Published>,
    start_offset: AtomicI64,
    flushed: AtomicI64,
    sync_lock: Mutex<()>,
    /// Rolled segments whose data and indexes still need an fsync.
    unsynced: Mutex<Vec<Arc<Segment>>>,
    /// A segment file was created or removed since the last directory fsync.
    dir_dirty: AtomicBool,
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
            source: std::io::Error::new(source.kind(), source.to_string()),
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

/// Base offsets of the segments in `dir`; removes index files left without a log.
fn list_segments(dir: &Path) -> std::io::Result<Vec<i64>> {
    let mut bases = Vec::new();
    let mut orphans = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((stem, ext)) = name.split_once('.') else {
            continue;
        };
        if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(base) = stem.parse::<i64>() else {
            continue;
        };
        match ext {
            "log" => bases.push(base),
            "index" | "timeindex" => orphans.push((base, entry.path())),
            _ => {}
        }
    }
    bases.sort_unstable();
    for (base, path) in orphans {
        if bases.binary_search(&base).is_err() {
            tracing::warn!(path = %path.display(), "removing index without a segment");
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(bases)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

impl PartitionLog {
    /// Opens (creating if needed) the log in `dir`, recovering the tail when the last
    /// shutdown was not clean.
    pub fn open(dir: &Path, config: LogConfig) -> Result<PartitionLog, LogError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let clean = marker.exists();
        let stored_start = read_start_offset(dir);
        let interval = config.index_interval_bytes.max(1);
        let max_batch = (config.max_batch_bytes as usize).max(RECOVERY_MAX_BATCH);
        let bases = list_segments(dir).map_err(io_err(dir))?;

        let mut segments: Vec<Arc<Segment>> = Vec::with_capacity(bases.len().max(1));
        let mut end_offset = None;
        for (i, &base) in bases.iter().enumerate() {
            let last = i + 1 == bases.len();
            let seg = Segment::open(dir, base).map_err(io_err(dir))?;
            let loaded = if clean || !last {
                seg.load(max_batch).map_err(io_err(&seg.log_path))?
            } else {
                None
            };
            let scan = match loaded {
                Some(scan) => scan,
                None => {
                    let before = seg.size();
                    let scan = seg
                        .rebuild(interval, max_batch, true)
                        .map_err(io_err(&seg.log_path))?;
                    if let Some(why) = &scan.error {
                        tracing::warn!(
                            segment = %seg.log_path.display(),
                            truncated_bytes = before - scan.valid_len,
                            kept_bytes = scan.valid_len,
                            next_offset = scan.next_offset.unwrap_or(base),
                            reason = %why,
                            "recovery truncated a torn or corrupt log tail"
                        );
                    } else if clean || !last {
                        tracing::info!(segment = %seg.log_path.display(), "rebuilt segment indexes");
                    }
                    scan
                }
            };
            end_offset = Some(scan.next_offset.unwrap_or(base));
            let damaged = scan.error.is_some();
            segments.push(Arc::new(seg));
            if damaged && !last {
                // Offsets must stay contiguous: nothing after damage can be trusted.
                for &later in &bases[i + 1..] {
                    tracing::warn!(base = later, "deleting segment after a corrupt one");
                    if let Ok(s) = Segment::open(dir, later) {
                        s.delete_files();
                    }
                }
                break;
            }
        }
        if segments.is_empty() {
            let base = stored_start.unwrap_or(0).max(0);
            let seg = Segment::create(dir, base).map_err(io_err(dir))?;
            segments.push(Arc::new(seg));
            end_offset = Some(base);
        }
        let active = segments.last().cloned().expect("at least one segment");
        let end_offset = end_offset.unwrap_or(active.base).max(active.base);
        let start = stored_start
            .unwrap_or(i64::MIN)
            .max(segments[0].base)
            .min(end_offset);
        if !clean {
            active.file.sync_data().map_err(io_err(&active.log_path))?;
        }
        if clean {
            std::fs::remove_file(&marker).map_err(io_err(&marker))?;
        }
        sync_dir(dir).map_err(io_err(dir))?;
        let published = Published {
            end_offset,
            active_base: active.base,
            active_size: active.size(),
        };
        Ok(PartitionLog {
            dir: dir.to_path_buf(),
            config,
            segments: RwLock::new(segments),
            writer: Mutex::new(Writer {
                active,
                active_since: Instant::now(),
                closed: false,
            }),
            published: Mutex::new(published),
            start_offset: AtomicI64::new(start),
            flushed: AtomicI64::new(end_offset),
            sync_lock: Mutex::new(()),
            unsynced: Mutex::new(Vec::new()),
            dir_dirty: AtomicBool::new(false),
        })
    }

    fn segment_bytes(&self) -> u64 {
        // Positions in the index are 32 bits; Kafka caps segments the same way.
        self.config.segment_bytes.clamp(1, i32::MAX as u64)
    }

    fn needs_roll(&self, w: &Writer, pending: u64, len: u64, last_offset: i64) -> bool {
        let size = w.active.size() + pending;
        size > 0
            && (size + len > self.segment_bytes()
                || w.active_since.elapsed() >= self.config.segment_age
                || last_offset - w.active.base > i32::MAX as i64)
    }

    fn publish(&self, p: Published) {
        *self.published.lock() = p;
    }

    fn published(&self) -> Published {
        *self.published.lock()
    }

    /// Makes a new active segment starting at the current end offset.
    fn roll(&self, w: &mut Writer) -> Result<(), LogError> {
        let old = w.active.clone();
        {
            let mut idx = old.idx.write();
            idx.maybe_add_time_entry(old.base);
            idx.persist(&old.index_path, &old.time_path)
                .map_err(io_err(&old.index_path))?;
        }
        let end = self.published().end_offset;
        let new = Arc::new(Segment::create(&self.dir, end).map_err(io_err(&self.dir))?);
        self.unsynced.lock().push(old);
        self.dir_dirty.store(true, Ordering::Release);
        self.segments.write().push(new.clone());
        w.active = new;
        w.active_since = Instant::now();
        self.publish(Published {
            end_offset: end,
            active_base: end,
            active_size: 0,
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
                let step = self
                    .write_run(&mut w, batches, &run, next)
                    .and_then(|()| self.roll(&mut w));
                if let Err(e) = step {
                    for &(j, _) in &run {
                        results[j] = Err(copy_err(&e));
                    }
                    results.push(Err(copy_err(&e)));
                    failed = Some(e);
                    run.clear();
                    continue;
                }
                run.clear();
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
                    self.config.index_interval_bytes.max(1),
                );
                position += b.len() as u64;
            }
        }
        seg.set_size(position);
        self.publish(Published {
            end_offset: next,
            active_base: seg.base,
            active_size: position,
        });
        Ok(())
    }

    /// Whole batches from the one containing `offset`, up to about `max_bytes` (at least
    /// one batch is returned even if larger). `offset == log_end_offset` returns nothing;
    /// outside [log_start_offset, log_end_offset] is `OffsetOutOfRange`.
    pub fn read(&self, offset: i64, max_bytes: u64) -> Result<ReadResult, LogError> {
        let p = self.published();
        let start = self.start_offset.load(Ordering::Acquire);
        if offset < start || offset > p.end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                start,
                end: p.end_offset,
            });
        }
        let mut res = ReadResult {
            log_start_offset: start,
            high_watermark: p.end_offset,
            ..Default::default()
        };
        if offset == p.end_offset {
            return Ok(res);
        }
        let segs = self.segments.read();
        let k = segs.partition_point(|s| s.base <= offset).saturating_sub(1);
        let mut budget = max_bytes;
        for seg in &segs[k..] {
            if seg.base > p.active_base {
                break;
            }
            let limit = if seg.base == p.active_base {
                p.active_size
            } else {
                seg.size()
            };
            let (pos, first_len) = if res.slices.is_empty() {
                match seg.find(offset, limit).map_err(io_err(&seg.log_path))? {
                    Some((pos, h)) => (pos, h.total_len() as u64),
                    None => continue,
                }
            } else {
                if limit < LOG_OVERHEAD as u64 {
                    continue;
                }
                let mut head = [0u8; LOG_OVERHEAD];
                seg.file
                    .read_exact_at(&mut head, 0)
                    .map_err(io_err(&seg.log_path))?;
                let len = batch::peek_total_len(&head)? as u64;
                if len > budget {
                    break;
                }
                (0, len)
            };
            let end = seg
                .extend(pos, first_len, budget, limit)
                .map_err(io_err(&seg.log_path))?;
            let len = end - pos;
            res.slices.push(FileSlice {
                file: seg.file.clone(),
                position: pos,
                len: len as u32,
            });
            res.total_bytes += len;
            budget = budget.saturating_sub(len);
            if budget == 0 || end < limit {
                break;
            }
        }
        Ok(res)
    }

    /// Same as `read` but copies the batches into memory, one `Bytes` per batch.
    pub fn read_batches(&self, offset: i64, max_bytes: u64) -> Result<Vec<Bytes>, LogError> {
        let res = self.read(offset, max_bytes)?;
        let mut out = Vec::new();
        for s in res.slices {
            let mut buf = vec![0u8; s.len as usize];
            s.file
                .read_exact_at(&mut buf, s.position)
                .map_err(io_err(&self.dir))?;
            let buf = Bytes::from(buf);
            for r in batch::split_batches(&buf)? {
                out.push(buf.slice(r));
            }
        }
        Ok(out)
    }

    pub fn log_start_offset(&self) -> i64 {
        self.start_offset.load(Ordering::Acquire)
    }
    /// Offset the next appended record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.published().end_offset
    }
    /// Offset up to which (exclusive) appended bytes are known to be fsynced.
    pub fn flushed_offset(&self) -> i64 {
        self.flushed.load(Ordering::Acquire)
    }
    /// Largest record timestamp in the log and the offset of the first record holding it
    /// (as Kafka answers ListOffsets MAX_TIMESTAMP); the offset of its batch's last
    /// record if that batch cannot be decoded.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        let p = self.published();
        let segs = self.segments.read();
        let mut best: Option<(i64, i64, &Arc<Segment>)> = None;
        for seg in segs.iter() {
            if let Some((ts, off)) = seg.idx.read().max_timestamp {
                if best.is_none_or(|(b, _, _)| ts > b) {
                    best = Some((ts, off, seg));
                }
            }
        }
        let (ts, last, seg) = best?;
        let limit = if seg.base == p.active_base {
            p.active_size
        } else {
            seg.size()
        };
        let exact = seg.find(last, limit).ok().flatten().and_then(|(pos, h)| {
            let mut buf = vec![0u8; h.total_len()];
            seg.file.read_exact_at(&mut buf, pos).ok()?;
            let records = batch::decode_records(&buf).ok()?;
            records
                .into_iter()
                .find(|r| r.timestamp == ts)
                .map(|r| r.offset)
        });
        Some((ts, exact.unwrap_or(last)))
    }
    /// First record whose timestamp is >= `timestamp`, as (offset, its timestamp): the
    /// first batch whose max timestamp reaches it, then the record inside (falling back
    /// to the batch's base offset and max timestamp if the batch cannot be decoded).
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Option<(i64, i64)> {
        let p = self.published();
        let start = self.log_start_offset();
        let segs = self.segments.read();
        for seg in segs.iter() {
            if seg.base > p.active_base {
                break;
            }
            let max = seg.idx.read().max_timestamp;
            if max.is_none_or(|(ts, _)| ts < timestamp) {
                continue;
            }
            let limit = if seg.base == p.active_base {
                p.active_size
            } else {
                seg.size()
            };
            let Ok(Some((pos, h))) = seg.find_by_time(timestamp, start, limit) else {
                continue;
            };
            let mut buf = vec![0u8; h.total_len()];
            let exact = seg
                .file
                .read_exact_at(&mut buf, pos)
                .ok()
                .and_then(|()| batch::decode_records(&buf).ok())
                .and_then(|recs| {
                    recs.into_iter()
                        .find(|r| r.timestamp >= timestamp && r.offset >= start)
                        .map(|r| (r.offset, r.timestamp))
                });
            return Some(exact.unwrap_or((h.base_offset.max(start), h.max_timestamp)));
        }
        None
    }

    /// Group commit: returns once every offset below `offset` is fsynced. Callers that
    /// arrive while an fsync runs are covered by the next single fsync.
    pub fn sync_to(&self, offset: i64) -> Result<(), LogError> {
        if self.flushed_offset() >= offset {
            return Ok(());
        }
        let _s = self.sync_lock.lock();
        if self.flushed_offset() >= offset {
            return Ok(());
        }
        self.sync_now()
    }

    /// fsyncs everything up to the current end (caller holds the sync lock). The active
    /// segment is read before the rolled list is drained so a concurrent roll cannot
    /// hide a segment holding data below the noted end.
    fn sync_now(&self) -> Result<(), LogError> {
        let end = self.published().end_offset;
        let active = self.segments.read().last().cloned();
        let rolled = std::mem::take(&mut *self.unsynced.lock());
        for (i, seg) in rolled.iter().enumerate() {
            if let Err(e) = seg.sync_all_files() {
                self.unsynced.lock().extend(rolled[i..].iter().cloned());
                return Err(io_err(&seg.log_path)(e));
            }
        }
        if self.dir_dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = sync_dir(&self.dir) {
                self.dir_dirty.store(true, Ordering::Release);
                return Err(io_err(&self.dir)(e));
            }
        }
        if let Some(seg) = active {
            seg.file.sync_data().map_err(io_err(&seg.log_path))?;
        }
        self.flushed.fetch_max(end, Ordering::AcqRel);
        Ok(())
    }

    /// fsyncs everything appended so far, indexes included.
    pub fn flush(&self) -> Result<(), LogError> {
        let active = self.writer.lock().active.clone();
        self.persist_indexes(&active, false)?;
        let _s = self.sync_lock.lock();
        self.sync_now()
    }

    fn persist_indexes(&self, seg: &Segment, finalize: bool) -> Result<(), LogError> {
        let mut idx = seg.idx.write();
        if finalize {
            idx.maybe_add_time_entry(seg.base);
        }
        idx.persist(&seg.index_path, &seg.time_path)
            .map_err(io_err(&seg.index_path))
    }

    /// Rolls the active segment if it is too big or too old (called periodically too).
    pub fn maybe_roll(&self) -> Result<bool, LogError> {
        let mut w = self.writer.lock();
        if w.closed || w.active.size() == 0 {
            return Ok(false);
        }
        if w.active.size() >= self.segment_bytes()
            || w.active_since.elapsed() >= self.config.segment_age
        {
            self.roll(&mut w)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Drops every record at or after `offset`. A batch holding `offset` is dropped
    /// whole, so the new end offset is that batch's base offset.
    pub fn truncate_to(&self, offset: i64) -> Result<(), LogError> {
        let mut w = self.writer.lock();
        let _s = self.sync_lock.lock();
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
        self.publish(Published {
            end_offset: new_end,
            active_base: seg.base,
            active_size: pos,
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
        seg.file.set_len(pos).map_err(io_err(&seg.log_path))?;
        seg.rebuild(
            self.config.index_interval_bytes.max(1),
            (self.config.max_batch_bytes as usize).max(RECOVERY_MAX_BATCH),
            false,
        )
        .map_err(io_err(&seg.log_path))?;
        if !Arc::ptr_eq(&w.active, &seg) {
            w.active = seg;
            w.active_since = Instant::now();
        }
        Ok(())
    }

    /// Deletes every segment and starts an empty log at `offset`.
    fn truncate_fully(&self, w: &mut Writer, offset: i64) -> Result<(), LogError> {
        let offset = offset.max(0);
        let old: Vec<Arc<Segment>> = std::mem::take(&mut *self.segments.write());
        for s in &old {
            s.delete_files();
        }
        self.unsynced.lock().clear();
        let seg = Arc::new(Segment::create(&self.dir, offset).map_err(io_err(&self.dir))?);
        self.segments.write().push(seg.clone());
        self.dir_dirty.store(true, Ordering::Release);
        w.active = seg;
        w.active_since = Instant::now();
        self.set_start_offset(offset)?;
        self.publish(Published {
            end_offset: offset,
            active_base: offset,
            active_size: 0,
        });
        self.flushed.fetch_min(offset, Ordering::AcqRel);
        Ok(())
    }

    fn set_start_offset(&self, offset: i64) -> Result<(), LogError> {
        self.start_offset.store(offset, Ordering::Release);
        let tmp = self.dir.join(format!("{LOG_START_FILE}.tmp"));
        let path = self.dir.join(LOG_START_FILE);
        std::fs::write(&tmp, format!("{offset}\n")).map_err(io_err(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
        Ok(())
    }

    /// Removes the first `count` segments (never the active one) and moves the start.
    fn delete_prefix(&self, count: usize) -> Result<usize, LogError> {
        let removed: Vec<Arc<Segment>> = {
            let mut segs = self.segments.write();
            let count = count.min(segs.len().saturating_sub(1));
            segs.drain(..count).collect()
        };
        if removed.is_empty() {
            return Ok(0);
        }
        let first_base = self.segments.read()[0].base;
        if first_base > self.log_start_offset() {
            self.set_start_offset(first_base)?;
        }
        self.unsynced.lock().retain(|s| s.base >= first_base);
        for s in &removed {
            tracing::debug!(segment = %s.log_path.display(), "deleting old segment");
            s.delete_files();
        }
        self.dir_dirty.store(true, Ordering::Release);
        Ok(removed.len())
    }

    /// Deletes whole old segments past the size and time limits; returns how many.
    pub fn apply_retention(&self, now_ms: i64) -> Result<usize, LogError> {
        let _w = self.writer.lock();
        let segs = self.segments.read().clone();
        let candidates = &segs[..segs.len().saturating_sub(1)];
        let mut count = 0;
        if let Some(retention) = self.config.retention {
            let cutoff = now_ms.saturating_sub(retention.as_millis() as i64);
            count = candidates
                .iter()
                .take_while(|s| segment_time(s) < cutoff)
                .count();
        }
        if let Some(limit) = self.config.retention_bytes {
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

    /// Flushes and writes the clean-shutdown marker; the log refuses appends afterwards.
    pub fn close(&self) -> Result<(), LogError> {
        let mut w = self.writer.lock();
        if w.closed {
            return Ok(());
        }
        self.persist_indexes(&w.active, true)?;
        {
            let _s = self.sync_lock.lock();
            self.sync_now()?;
        }
        w.active
            .sync_all_files()
            .map_err(io_err(&w.active.index_path))?;
        let marker = self.dir.join(CLEAN_SHUTDOWN_FILE);
        File::create(&marker)
            .and_then(|f| f.sync_all())
            .map_err(io_err(&marker))?;
        sync_dir(&self.dir).map_err(io_err(&self.dir))?;
        w.closed = true;
        Ok(())
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    /// Total bytes in all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.read().iter().map(|s| s.size()).sum()
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
    seg.file
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(i64::MAX, |d| d.as_millis() as i64)
}

fn read_start_offset(dir: &Path) -> Option<i64> {
    std::fs::read_to_string(dir.join(LOG_START_FILE))
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

#[cfg(test)]
#[path = "partition_log_tests.rs"]
mod tests;
