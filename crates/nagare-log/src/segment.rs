//! One segment: a `.log` file of consecutive record batches starting at `base` offset,
//! with its in-memory sparse indexes mirrored in `.index` / `.timeindex`.

use std::fs::{File, OpenOptions};
use std::io::{IoSlice, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::batch::{self, BatchHeader, HEADER_LEN, LOG_OVERHEAD};
use crate::index::Indexes;

pub(crate) const LOG_SUFFIX: &str = ".log";
pub(crate) const INDEX_SUFFIX: &str = ".index";
pub(crate) const TIMEINDEX_SUFFIX: &str = ".timeindex";

/// How reads and scans fetch data: one pread covers many small batches.
const SCAN_CHUNK: usize = 256 * 1024;
const LOOKUP_CHUNK: usize = 8 * 1024;

pub(crate) fn file_stem(base: i64) -> String {
    format!("{base:020}")
}

pub(crate) struct Segment {
    pub base: i64,
    pub file: Arc<File>,
    pub log_path: PathBuf,
    pub index_path: PathBuf,
    pub time_path: PathBuf,
    /// Bytes of whole batches written (published after each write completes).
    size: AtomicU64,
    pub idx: RwLock<Indexes>,
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

    /// Creates a new empty segment (replacing leftovers with the same name).
    pub fn create(dir: &Path, base: i64) -> std::io::Result<Segment> {
        let (log_path, index_path, time_path) = Self::paths(dir, base);
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&log_path)?;
        file.set_len(0)?;
        File::create(&index_path)?;
        File::create(&time_path)?;
        Ok(Segment {
            base,
            file: Arc::new(file),
            log_path,
            index_path,
            time_path,
            size: AtomicU64::new(0),
            idx: RwLock::new(Indexes::default()),
        })
    }

    /// Opens an existing segment's log file; indexes are loaded by the caller.
    pub fn open(dir: &Path, base: i64) -> std::io::Result<Segment> {
        let (log_path, index_path, time_path) = Self::paths(dir, base);
        let file = OpenOptions::new().read(true).append(true).open(&log_path)?;
        let len = file.metadata()?.len();
        Ok(Segment {
            base,
            file: Arc::new(file),
            log_path,
            index_path,
            time_path,
            size: AtomicU64::new(len),
            idx: RwLock::new(Indexes::default()),
        })
    }

    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    pub fn set_size(&self, size: u64) {
        self.size.store(size, Ordering::Release);
    }

    /// Rebuilds the indexes by scanning the whole file (checking CRCs if asked) and
    /// truncates the file after the last good batch. Returns what the scan found.
    pub fn rebuild(
        &self,
        interval: u32,
        max_batch: usize,
        check_crc: bool,
    ) -> std::io::Result<ScanEnd> {
        let file_len = self.file.metadata()?.len();
        let mut idx = Indexes::default();
        let base = self.base;
        let end = scan(
            &self.file,
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
            self.file.set_len(end.valid_len)?;
        }
        idx.rewrite(&self.index_path, &self.time_path)?;
        *self.idx.write() = idx;
        self.set_size(end.valid_len);
        Ok(end)
    }

    /// Loads the index files and checks the tail from the last index entry (headers only).
    /// Returns `None` when the files are missing/inconsistent or the tail does not parse,
    /// so the caller rebuilds.
    pub fn load(&self, max_batch: usize) -> std::io::Result<Option<ScanEnd>> {
        let size = self.size();
        let Some(mut idx) = Indexes::load(&self.index_path, &self.time_path, size)? else {
            return Ok(None);
        };
        let from = idx.offsets.last().map_or(0, |&(_, p)| p as u64);
        let base = self.base;
        let mut tail_max: Option<(i64, i64)> = None;
        let mut since = 0u64;
        let first = (from == 0).then_some(base);
        let end = scan(
            &self.file,
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

    /// Appends whole batches with one vectored write (the file is in append mode).
    /// On failure the file is cut back to its previous length.
    pub fn write(&self, bufs: &[&[u8]]) -> std::io::Result<()> {
        let before = self.size();
        let mut slices: Vec<IoSlice<'_>> = bufs.iter().map(|b| IoSlice::new(b)).collect();
        let mut rest = &mut slices[..];
        let result = (|| {
            while !rest.is_empty() {
                match (&*self.file).write_vectored(rest) {
                    Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                    Ok(n) => IoSlice::advance_slices(&mut rest, n),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })();
        if result.is_err() {
            let _ = self.file.set_len(before);
        }
        result
    }

    /// Finds the first batch whose last offset is >= `offset` among the first `limit`
    /// bytes; returns its position and header.
    pub fn find(&self, offset: i64, limit: u64) -> std::io::Result<Option<(u64, BatchHeader)>> {
        let pos = self.idx.read().lookup(self.base, offset);
        self.scan_headers(pos, limit, LOOKUP_CHUNK, |h| h.last_offset() >= offset)
    }

    /// First batch (within `limit` bytes) whose max timestamp is >= `ts` and whose last
    /// offset is >= `min_offset`.
    pub fn find_by_time(
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
        let mut reader = ChunkReader::new(&self.file, limit, chunk);
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
    pub fn extend(
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
        let mut head = [0u8; LOG_OVERHEAD];
        while end + LOG_OVERHEAD as u64 <= limit {
            self.file.read_exact_at(&mut head, end)?;
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

    pub fn delete_files(&self) {
        for p in [&self.log_path, &self.index_path, &self.time_path] {
            if let Err(e) = std::fs::remove_file(p) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %p.display(), error = %e, "could not delete segment file");
                }
            }
        }
    }

    /// fsyncs the log file and the index files.
    pub fn sync_all_files(&self) -> std::io::Result<()> {
        self.file.sync_data()?;
        for p in [&self.index_path, &self.time_path] {
            if let Ok(f) = File::open(p) {
                f.sync_data()?;
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
        // Appends assign offsets contiguously, so anything else is damage (the base
        // offset is outside the CRC).
        let expected = next_offset.or(first_offset).unwrap_or(h.base_offset);
        if h.base_offset != expected || h.last_offset_delta < 0 {
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
            if let Err(e) = batch::validate(whole, max_batch) {
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
