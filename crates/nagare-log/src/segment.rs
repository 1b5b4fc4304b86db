//! One segment: a `.log` file of consecutive record batches starting at `base` offset,
//! with its in-memory sparse indexes mirrored in `.index` / `.timeindex`.
//!
//! The `.log` file is opened lazily through the shared open-file budget; the index files
//! are opened only while they are written.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::batch::{self, BatchHeader, HEADER_LEN, LOG_OVERHEAD};
use crate::index::Indexes;
use crate::open_files::{FileSlot, OpenFiles};
use crate::storage::{OpenMode, Storage};
use crate::txn_index::{AbortedTxnEntry, TXNINDEX_SUFFIX};

pub(crate) mod prefill;

pub(crate) const LOG_SUFFIX: &str = ".log";
pub(crate) const INDEX_SUFFIX: &str = ".index";
pub(crate) const TIMEINDEX_SUFFIX: &str = ".timeindex";

/// How reads and scans fetch data: one pread covers many small batches.
const SCAN_CHUNK: usize = 256 * 1024;
const LOOKUP_CHUNK: usize = 8 * 1024;

pub(crate) fn file_stem(base: i64) -> String {
    format!("{base:020}")
}

/// The file system and descriptor budget a log works with.
#[derive(Clone)]
pub(crate) struct Io {
    pub storage: Storage,
    pub files: OpenFiles,
}

impl Io {
    /// Opens a short-lived file, retrying when descriptors run out.
    pub(crate) fn open(&self, path: &Path, mode: OpenMode) -> std::io::Result<File> {
        self.files.open_transient(&self.storage, path, mode)
    }

    /// Reads a whole small file; `None` when it does not exist.
    pub(crate) fn read_opt(&self, path: &Path) -> std::io::Result<Option<Vec<u8>>> {
        let f = match self.open(path, OpenMode::Read) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut &f, &mut out)?;
        Ok(Some(out))
    }

    /// fsyncs a directory's entries.
    pub(crate) fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.files
            .retry_out_of_descriptors(|| self.storage.sync_dir(dir))
    }
}

pub(crate) struct Segment {
    pub base: i64,
    file: FileSlot,
    io: Io,
    pub log_path: PathBuf,
    pub index_path: PathBuf,
    pub time_path: PathBuf,
    pub txn_path: PathBuf,
    /// Bytes of whole batches written (published after each write completes).
    size: AtomicU64,
    /// Bytes known to be on disk: covered by a completed fsync (or found at open).
    synced: AtomicU64,
    /// Where the zeros written ahead end (see `prefill`): the file's length is the larger
    /// of this and `size`, so appends past the zeros need not move it.
    allocated: AtomicU64,
    /// fsyncs of this segment so far (zeros are written ahead only once it is many).
    syncs: AtomicU32,
    /// The size and fsync count when zeros were last written ahead (`prefill`).
    prefilled_at: Mutex<(u64, u32)>,
    /// An fsync failed: the kernel may have dropped the dirty pages from `synced` on
    /// while still reporting later fsyncs as successful, so those bytes must be written
    /// again before they count as durable.
    sync_failed: AtomicBool,
    /// A failed write may have left bytes past `size`; cut them before the next write.
    dirty_tail: AtomicBool,
    pub idx: RwLock<Indexes>,
    /// The aborted transactions whose ABORT marker is in this segment (`.txnindex`).
    pub txns: RwLock<SegmentTxns>,
}

/// A segment's `.txnindex` entries: all of them in memory, and how many are in the file.
#[derive(Debug, Default)]
pub(crate) struct SegmentTxns {
    pub entries: Vec<AbortedTxnEntry>,
    pub persisted: usize,
}

/// What a scan of a segment's batches found.
pub(crate) struct ScanEnd {
    /// End of the last good batch.
    pub valid_len: u64,
    /// Offset after the last good batch, if any batch was seen.
    pub next_offset: Option<i64>,
    /// Why the scan stopped before the end of the file.
    pub error: Option<String>,
}

impl Segment {
    fn paths(dir: &Path, base: i64) -> (PathBuf, PathBuf, PathBuf) {
        let stem = file_stem(base);
        (
            dir.join(format!("{stem}{LOG_SUFFIX}")),
            dir.join(format!("{stem}{INDEX_SUFFIX}")),
            dir.join(format!("{stem}{TIMEINDEX_SUFFIX}")),
        )
    }

    fn new(io: &Io, dir: &Path, base: i64, size: u64) -> Segment {
        let (log_path, index_path, time_path) = Self::paths(dir, base);
        let txn_path = dir.join(format!("{}{TXNINDEX_SUFFIX}", file_stem(base)));
        let file = io
            .files
            .slot(&io.storage, log_path.clone(), OpenMode::ReadWrite);
        Segment {
            base,
            file,
            io: io.clone(),
            log_path,
            index_path,
            time_path,
            txn_path,
            size: AtomicU64::new(size),
            synced: AtomicU64::new(size),
            allocated: AtomicU64::new(size),
            syncs: AtomicU32::new(0),
            prefilled_at: Mutex::new((0, 0)),
            sync_failed: AtomicBool::new(false),
            dirty_tail: AtomicBool::new(false),
            idx: RwLock::new(Indexes::default()),
            txns: RwLock::new(SegmentTxns::default()),
        }
    }

    /// Creates a new empty segment (replacing leftovers with the same name). Its
    /// directory entry is durable only after the caller fsyncs the directory.
    pub(crate) fn create(io: &Io, dir: &Path, base: i64) -> std::io::Result<Segment> {
        let seg = Segment::new(io, dir, base, 0);
        let file = io.open(&seg.log_path, OpenMode::CreateTruncate)?;
        io.open(&seg.index_path, OpenMode::CreateTruncate)?;
        io.open(&seg.time_path, OpenMode::CreateTruncate)?;
        // A leftover `.txnindex` with this name belongs to data that is gone.
        if let Err(e) = io.storage.remove_file(&seg.txn_path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(e);
            }
        }
        seg.file.insert(file);
        Ok(seg)
    }

    /// Opens an existing segment's log file; indexes are loaded by the caller.
    pub(crate) fn open(io: &Io, dir: &Path, base: i64) -> std::io::Result<Segment> {
        let seg = Segment::new(io, dir, base, 0);
        let len = seg.file()?.metadata()?.len();
        seg.set_size(len);
        seg.synced.store(len, Ordering::Release);
        seg.allocated.store(len, Ordering::Release);
        Ok(seg)
    }

    /// The open `.log` file (opened now if the descriptor budget had closed it).
    pub(crate) fn file(&self) -> std::io::Result<Arc<File>> {
        self.file.get()
    }

    pub(crate) fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    pub(crate) fn set_size(&self, size: u64) {
        self.size.store(size, Ordering::Release);
    }

    /// Rebuilds the indexes by scanning the whole file (checking CRCs if asked) and
    /// truncates the file after the last good batch. Returns what the scan found.
    pub(crate) fn rebuild(
        &self,
        interval: u32,
        max_batch: usize,
        check_crc: bool,
    ) -> std::io::Result<ScanEnd> {
        let file = self.file()?;
        let file_len = file.metadata()?.len();
        let mut idx = Indexes::default();
        let base = self.base;
        let mut end = scan(
            &file,
            0,
            file_len,
            Some(base),
            max_batch,
            check_crc,
            |pos, h, len| {
                idx.on_append(base, pos, len, h.last_offset(), h.max_timestamp, interval);
            },
        )?;
        if end.valid_len < file_len {
            if end.error.is_some() && prefill::is_prefill(&file, end.valid_len, file_len)? {
                tracing::info!(
                    segment = %self.log_path.display(),
                    bytes = file_len - end.valid_len,
                    "cutting the zeros written ahead of the last batch"
                );
                end.error = None;
            }
            self.io.storage.set_len(&file, end.valid_len)?;
        }
        self.allocated.store(end.valid_len, Ordering::Release);
        idx.rewrite(&self.io, &self.index_path, &self.time_path)?;
        *self.idx.write() = idx;
        self.set_size(end.valid_len);
        self.synced.fetch_min(end.valid_len, Ordering::AcqRel);
        self.dirty_tail.store(false, Ordering::Release);
        Ok(end)
    }

    /// Loads the index files and checks the tail from the last index entry (headers only).
    /// Returns `None` when the files are missing/inconsistent or the tail does not parse,
    /// so the caller rebuilds.
    pub(crate) fn load(&self, max_batch: usize) -> std::io::Result<Option<ScanEnd>> {
        let size = self.size();
        let Some(mut idx) = Indexes::load(&self.io, &self.index_path, &self.time_path, size)?
        else {
            return Ok(None);
        };
        let from = idx.offsets.last().map_or(0, |&(_, p)| p as u64);
        let base = self.base;
        let mut tail_max: Option<(i64, i64)> = None;
        let mut since = 0u64;
        let first = (from == 0).then_some(base);
        let end = scan(
            &*self.file()?,
            from,
            size,
            first,
            max_batch,
            false,
            |_, h, len| {
                if tail_max.is_none_or(|(ts, _)| h.max_timestamp > ts) {
                    tail_max = Some((h.max_timestamp, h.last_offset()));
                }
                since += len;
            },
        )?;
        if end.error.is_some() || end.valid_len != size {
            return Ok(None);
        }
        // The time index holds the maximum as of its last entry (written on roll and
        // close); batches after the last offset entry may hold a larger one.
        let indexed = idx.times.last().map(|&(ts, rel)| (ts, base + rel as i64));
        idx.max_timestamp = match (indexed, tail_max) {
            (Some(a), Some(b)) => Some(if b.0 > a.0 { b } else { a }),
            (a, b) => a.or(b),
        };
        idx.bytes_since_entry = since;
        *self.idx.write() = idx;
        Ok(Some(end))
    }

    /// Writes whole batches at the end with one vectored write. On failure (a full
    /// disk, an I/O error) the file is cut back to its previous length, so a later
    /// write never lands behind half a batch; if even the cut fails, the next write
    /// retries it first.
    pub(crate) fn write(&self, bufs: &[&[u8]]) -> std::io::Result<()> {
        let file = self.file()?;
        let before = self.size();
        if self.dirty_tail.load(Ordering::Acquire) {
            self.io.storage.set_len(&file, before)?;
            self.allocated.store(before, Ordering::Release);
            self.dirty_tail.store(false, Ordering::Release);
        }
        let result = self.io.storage.write_at(&file, bufs, before);
        if result.is_err() {
            if self.io.storage.set_len(&file, before).is_ok() {
                self.allocated.store(before, Ordering::Release);
            } else {
                self.dirty_tail.store(true, Ordering::Release);
            }
        }
        result
    }

    /// Cuts the file to `len` bytes (whole batches) and forgets what lies past it.
    pub(crate) fn cut(&self, len: u64) -> std::io::Result<()> {
        let file = self.file()?;
        self.io.storage.set_len(&file, len)?;
        self.allocated.store(len, Ordering::Release);
        self.set_size(len);
        self.synced.fetch_min(len, Ordering::AcqRel);
        self.dirty_tail.store(false, Ordering::Release);
        Ok(())
    }

    /// Makes the batches written so far durable.
    ///
    /// After a failed fsync, Linux may already have marked the dirty pages clean (the
    /// write-back error is reported once) and a retried fsync then succeeds without
    /// writing them. So a failure is remembered, and the next attempt first re-reads
    /// everything past the last durable point, checks each batch's CRC and writes it
    /// again before fsyncing: bytes are never reported durable on the strength of an
    /// fsync that followed a failed one without a fresh write.
    pub(crate) fn sync_data(&self, max_batch: usize) -> std::io::Result<()> {
        let file = self.file()?;
        let size = self.size();
        if self.sync_failed.load(Ordering::Acquire) {
            self.rewrite_unsynced(&file, size, max_batch)?;
        }
        match self.io.storage.sync_data(&file) {
            Ok(()) => {
                self.synced.fetch_max(size, Ordering::AcqRel);
                self.sync_failed.store(false, Ordering::Release);
                Ok(())
            }
            Err(e) => {
                self.sync_failed.store(true, Ordering::Release);
                Err(e)
            }
        }
    }

    fn rewrite_unsynced(&self, file: &File, size: u64, max_batch: usize) -> std::io::Result<()> {
        let from = self.synced.load(Ordering::Acquire).min(size);
        let end = scan(file, from, size, None, max_batch, true, |_, _, _| {})?;
        if end.valid_len < size {
            // The page cache no longer holds what was written: those batches are gone.
            tracing::error!(
                segment = %self.log_path.display(),
                from = end.valid_len,
                "unsynced batches were lost after a failed fsync"
            );
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "unsynced batches were lost after a failed fsync",
            ));
        }
        // The failed fsync may also have lost a cut of the file's length.
        self.io.storage.set_len(file, size)?;
        self.allocated.store(size, Ordering::Release);
        let mut buf = vec![0u8; SCAN_CHUNK];
        let mut pos = from;
        while pos < size {
            let n = ((size - pos) as usize).min(SCAN_CHUNK);
            file.read_exact_at(&mut buf[..n], pos)?;
            self.io.storage.write_at(file, &[&buf[..n]], pos)?;
            pos += n as u64;
        }
        Ok(())
    }

    /// Finds the first batch whose last offset is >= `offset` among the first `limit`
    /// bytes; returns its position and header.
    pub(crate) fn find(
        &self,
        offset: i64,
        limit: u64,
    ) -> std::io::Result<Option<(u64, BatchHeader)>> {
        let pos = self.idx.read().lookup(self.base, offset);
        self.scan_headers(pos, limit, LOOKUP_CHUNK, |h| h.last_offset() >= offset)
    }

    /// First batch (within `limit` bytes) whose max timestamp is >= `ts` and whose last
    /// offset is >= `min_offset`.
    pub(crate) fn find_by_time(
        &self,
        ts: i64,
        min_offset: i64,
        limit: u64,
    ) -> std::io::Result<Option<(u64, BatchHeader)>> {
        let pos = {
            let idx = self.idx.read();
            let offset = idx.time_lookup(self.base, ts).max(min_offset);
            idx.lookup(self.base, offset)
        };
        self.scan_headers(pos, limit, SCAN_CHUNK, |h| {
            h.max_timestamp >= ts && h.last_offset() >= min_offset
        })
    }

    /// Walks batch headers from `pos` (a batch start) up to `limit` and returns the first
    /// batch `wanted` accepts; a short or unparsable header ends the walk.
    fn scan_headers(
        &self,
        mut pos: u64,
        limit: u64,
        chunk: usize,
        wanted: impl Fn(&BatchHeader) -> bool,
    ) -> std::io::Result<Option<(u64, BatchHeader)>> {
        let file = self.file()?;
        let mut reader = ChunkReader::new(&file, limit, chunk);
        while pos + HEADER_LEN as u64 <= limit {
            let Some(head) = reader.get(pos, HEADER_LEN)? else {
                return Ok(None);
            };
            let Ok(h) = batch::parse_header(head) else {
                return Ok(None);
            };
            if wanted(&h) {
                return Ok(Some((pos, h)));
            }
            pos += h.total_len() as u64;
        }
        Ok(None)
    }

    /// End of the whole batches from `start` (a batch start) that fit in `max_bytes`
    /// (at least `first_len`, the first batch) without passing `limit`.
    pub(crate) fn extend(
        &self,
        start: u64,
        first_len: u64,
        max_bytes: u64,
        limit: u64,
    ) -> std::io::Result<u64> {
        let want = start.saturating_add(max_bytes.max(first_len)).min(limit);
        let mut end = start + first_len;
        if end >= want {
            return Ok(end);
        }
        // Index entries are batch starts: jump to the last one that fits.
        if let Some(b) = self.idx.read().boundary_at_or_below(want) {
            end = end.max(b);
        }
        let file = self.file()?;
        let mut head = [0u8; LOG_OVERHEAD];
        while end + LOG_OVERHEAD as u64 <= limit {
            file.read_exact_at(&mut head, end)?;
            let Ok(len) = batch::peek_total_len(&head) else {
                break;
            };
            if end + len as u64 > want {
                break;
            }
            end += len as u64;
        }
        Ok(end)
    }

    /// Closes the file and removes the segment's files (their directory entries go
    /// away for good at the next directory fsync).
    pub(crate) fn delete_files(&self) {
        self.file.close();
        for p in [
            &self.log_path,
            &self.index_path,
            &self.time_path,
            &self.txn_path,
        ] {
            if let Err(e) = self.io.storage.remove_file(p) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %p.display(), error = %e, "could not delete segment file");
                }
            }
        }
    }

    /// Records an aborted transaction whose marker is in this segment, writing it to the
    /// `.txnindex` file at once (a failed write is retried by the next persist).
    pub(crate) fn add_aborted(&self, entry: AbortedTxnEntry) {
        self.txns.write().entries.push(entry);
        if let Err(e) = self.persist_txns() {
            tracing::warn!(path = %self.txn_path.display(), error = %e, "could not write the transaction index");
        }
    }

    /// Writes the `.txnindex` entries not yet in the file.
    pub(crate) fn persist_txns(&self) -> std::io::Result<()> {
        let mut t = self.txns.write();
        while t.persisted < t.entries.len() {
            let i = t.persisted;
            crate::txn_index::write_entry(&self.io, &self.txn_path, i, &t.entries[i])?;
            t.persisted += 1;
        }
        Ok(())
    }

    /// Replaces the `.txnindex` entries (and the file) with `entries`.
    pub(crate) fn replace_txns(&self, entries: Vec<AbortedTxnEntry>) -> std::io::Result<()> {
        let mut t = self.txns.write();
        crate::txn_index::rewrite(&self.io, &self.txn_path, &entries)?;
        t.persisted = entries.len();
        t.entries = entries;
        Ok(())
    }

    /// fsyncs the log file and the index files.
    pub(crate) fn sync_all_files(&self, max_batch: usize) -> std::io::Result<()> {
        self.sync_data(max_batch)?;
        self.persist_txns()?;
        for p in [&self.index_path, &self.time_path, &self.txn_path] {
            if let Ok(f) = self.io.open(p, OpenMode::Read) {
                self.io.storage.sync_data(&f)?;
            }
        }
        Ok(())
    }
}

/// Walks the batches of `file` from `from` to `file_len`, calling `on_batch(position,
/// header, length)` for each good one. The first batch must start at `first_offset`
/// when given; each later one must follow the previous one. Stops at the first batch that is torn, fails to
/// parse, is larger than `max_batch`, breaks offset order or (with `check_crc`) fails
/// validation.
pub(crate) fn scan(
    file: &File,
    from: u64,
    file_len: u64,
    first_offset: Option<i64>,
    max_batch: usize,
    check_crc: bool,
    mut on_batch: impl FnMut(u64, &BatchHeader, u64),
) -> std::io::Result<ScanEnd> {
    let mut reader = ChunkReader::new(file, file_len, SCAN_CHUNK);
    let mut pos = from;
    let mut next_offset: Option<i64> = None;
    let stop = |pos, next_offset, why: String| {
        Ok(ScanEnd {
            valid_len: pos,
            next_offset,
            error: Some(why),
        })
    };
    while pos < file_len {
        let Some(head) = reader.get(pos, HEADER_LEN)? else {
            return stop(pos, next_offset, format!("torn batch header at {pos}"));
        };
        let h = match batch::parse_header(head) {
            Ok(h) => h,
            Err(e) => return stop(pos, next_offset, format!("bad batch at {pos}: {e}")),
        };
        let len = h.total_len();
        if len > max_batch {
            return stop(
                pos,
                next_offset,
                format!("batch at {pos} claims {len} bytes"),
            );
        }
        if pos + len as u64 > file_len {
            return stop(
                pos,
                next_offset,
                format!("torn batch at {pos}: {len} bytes, file ends at {file_len}"),
            );
        }
        // Offsets only grow (the base offset is outside the CRC, so anything else is
        // damage); compaction leaves holes, so a batch may start past the expected one.
        let expected = next_offset.or(first_offset).unwrap_or(h.base_offset);
        if h.base_offset < expected || h.last_offset_delta < 0 {
            return stop(
                pos,
                next_offset,
                format!(
                    "batch at {pos} has offset {}, expected {expected}",
                    h.base_offset
                ),
            );
        }
        if check_crc {
            let Some(whole) = reader.get(pos, len)? else {
                return stop(pos, next_offset, format!("torn batch at {pos}"));
            };
            if let Err(e) = batch::validate_stored(whole, max_batch) {
                return stop(pos, next_offset, format!("bad batch at {pos}: {e}"));
            }
        }
        on_batch(pos, &h, len as u64);
        next_offset = Some(h.last_offset() + 1);
        pos += len as u64;
    }
    Ok(ScanEnd {
        valid_len: pos,
        next_offset,
        error: None,
    })
}

/// Positioned reads through a buffer, so scanning small batches costs few syscalls.
struct ChunkReader<'a> {
    file: &'a File,
    limit: u64,
    chunk: usize,
    buf: Vec<u8>,
    buf_pos: u64,
}

impl<'a> ChunkReader<'a> {
    fn new(file: &'a File, limit: u64, chunk: usize) -> Self {
        ChunkReader {
            file,
            limit,
            chunk,
            buf: Vec::new(),
            buf_pos: 0,
        }
    }

    /// `n` bytes at `pos`, or `None` if they extend past the limit (or the file ended).
    fn get(&mut self, pos: u64, n: usize) -> std::io::Result<Option<&[u8]>> {
        let Some(end) = pos.checked_add(n as u64) else {
            return Ok(None);
        };
        if end > self.limit {
            return Ok(None);
        }
        if pos < self.buf_pos || end > self.buf_pos + self.buf.len() as u64 {
            let want = (n.max(self.chunk) as u64).min(self.limit - pos) as usize;
            self.buf.resize(want, 0);
            let mut got = 0;
            while got < want {
                match self.file.read_at(&mut self.buf[got..], pos + got as u64) {
                    Ok(0) => break,
                    Ok(k) => got += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            self.buf.truncate(got);
            self.buf_pos = pos;
            if got < n {
                return Ok(None);
            }
        }
        let s = (pos - self.buf_pos) as usize;
        Ok(Some(&self.buf[s..s + n]))
    }
}
