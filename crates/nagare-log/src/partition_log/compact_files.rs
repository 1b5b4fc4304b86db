//! The file side of a compaction pass: reading segments in large chunks through the
//! throttle, writing the new segment with its indexes, and finishing or discarding on
//! open a swap a crash interrupted.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::io_err;
use crate::batch::{BatchHeader, HEADER_LEN};
use crate::cleaner::filter;
use crate::cleaner::Throttle;
use crate::index::Indexes;
use crate::segment::{scan, Io, LOG_SUFFIX};
use crate::storage::OpenMode;
use crate::LogError;

/// Reads of segments being cleaned go through a buffer this large.
const IO_CHUNK: usize = 1 << 20;
pub(super) const CLEANED_SUFFIX: &str = ".log.cleaned";
pub(super) const SWAP_SUFFIX: &str = ".log.swap";

pub(super) fn remove_if_there(io: &Io, path: &Path) -> Result<(), LogError> {
    match io.storage.remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err(path)(e)),
        _ => Ok(()),
    }
}

/// Calls `f(position, header, whole batch)` for every batch of `file` between `from`
/// and `limit`, reading in large chunks through the throttle; `f` returns false to stop.
pub(super) fn each_batch(
    file: &File,
    path: &Path,
    from: u64,
    limit: u64,
    throttle: &mut Throttle,
    mut f: impl FnMut(u64, &BatchHeader, &[u8]) -> Result<bool, LogError>,
) -> Result<(), LogError> {
    let mut buf: Vec<u8> = Vec::new();
    let mut buf_pos = from;
    let mut pos = from;
    // Reads at least `n` bytes at `pos` (more, up to a chunk, when the segment has them).
    let mut refill = |buf: &mut Vec<u8>, buf_pos: &mut u64, pos: u64, n: usize| {
        let want = (n.max(IO_CHUNK) as u64).min(limit - pos) as usize;
        buf.resize(want, 0);
        file.read_exact_at(buf, pos).map_err(io_err(path))?;
        throttle.consume(want as u64);
        *buf_pos = pos;
        Ok::<(), LogError>(())
    };
    let covers = |buf: &Vec<u8>, buf_pos: u64, pos: u64, n: usize| {
        pos >= buf_pos && pos + n as u64 <= buf_pos + buf.len() as u64
    };
    while pos + HEADER_LEN as u64 <= limit {
        if !covers(&buf, buf_pos, pos, HEADER_LEN) {
            refill(&mut buf, &mut buf_pos, pos, HEADER_LEN)?;
        }
        let h = filter::header(&buf[(pos - buf_pos) as usize..])?;
        let len = h.total_len();
        if pos + len as u64 > limit {
            break; // a torn tail: the segment ends before it
        }
        if !covers(&buf, buf_pos, pos, len) {
            refill(&mut buf, &mut buf_pos, pos, len)?;
        }
        let at = (pos - buf_pos) as usize;
        if !f(pos, &h, &buf[at..at + len])? {
            break;
        }
        pos += len as u64;
    }
    Ok(())
}

/// The new segment being written: buffered writes and its indexes.
pub(super) struct Output {
    io: Io,
    path: PathBuf,
    file: File,
    base: i64,
    interval: u32,
    pos: u64,
    buf: Vec<u8>,
    idx: Indexes,
    /// The last offset written so far.
    pub(super) last_offset: i64,
}

impl Output {
    pub(super) fn create(
        io: &Io,
        path: &Path,
        base: i64,
        interval: u32,
    ) -> Result<Output, LogError> {
        let file = io
            .open(path, OpenMode::CreateTruncate)
            .map_err(io_err(path))?;
        Ok(Output {
            io: io.clone(),
            path: path.to_path_buf(),
            file,
            base,
            interval: interval.max(1),
            pos: 0,
            buf: Vec::with_capacity(IO_CHUNK),
            idx: Indexes::default(),
            last_offset: base - 1,
        })
    }

    pub(super) fn write(&mut self, bytes: &[u8], h: &BatchHeader) -> Result<bool, LogError> {
        if self.buf.len() + bytes.len() > IO_CHUNK && !self.buf.is_empty() {
            // Bounded memory: the group is written out a chunk at a time.
            self.flush()?;
        }
        let at = self.pos + self.buf.len() as u64;
        self.idx.on_append(
            self.base,
            at,
            bytes.len() as u64,
            h.last_offset(),
            h.max_timestamp,
            self.interval,
        );
        self.buf.extend_from_slice(bytes);
        self.last_offset = h.last_offset();
        Ok(true)
    }

    fn flush(&mut self) -> Result<(), LogError> {
        if !self.buf.is_empty() {
            self.io
                .storage
                .write_at(&self.file, &[&self.buf], self.pos)
                .map_err(io_err(&self.path))?;
            self.pos += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes what is buffered and fsyncs; returns the size and the indexes.
    pub(super) fn finish(mut self) -> Result<(u64, Indexes), LogError> {
        self.flush()?;
        self.io
            .storage
            .sync_data(&self.file)
            .map_err(io_err(&self.path))?;
        self.idx.maybe_add_time_entry(self.base);
        Ok((self.pos, self.idx))
    }
}

/// Finishes or discards what a crash left of a swap (called on open, before the
/// segments are listed): `.cleaned` files were never committed and are removed; a
/// `.swap` file was committed, so the segments it replaces go and it takes their place.
pub(crate) fn recover_swaps(io: &Io, dir: &Path, max_batch: usize) -> std::io::Result<()> {
    let names = io.storage.list_dir(dir)?;
    let mut touched = false;
    for name in &names {
        if name.ends_with(CLEANED_SUFFIX) {
            tracing::info!(file = %name, "removing an unfinished cleaned segment");
            io.storage.remove_file(&dir.join(name))?;
            touched = true;
        }
    }
    for name in &names {
        let Some(stem) = name.strip_suffix(SWAP_SUFFIX) else {
            continue;
        };
        let Ok(base) = stem.parse::<i64>() else {
            continue;
        };
        let swap: PathBuf = dir.join(name);
        let file = io.open(&swap, OpenMode::Read)?;
        let len = file.metadata()?.len();
        let end = scan(&file, 0, len, None, max_batch, false, |_, _, _| {})?;
        drop(file);
        let next = end.next_offset.unwrap_or(base);
        tracing::info!(file = %name, up_to = next, "completing an interrupted segment swap");
        for other in &names {
            let Some((s, ext)) = other.split_once('.') else {
                continue;
            };
            let Ok(b) = s.parse::<i64>() else {
                continue;
            };
            let replaced =
                (b > base && b < next) || (b == base && ext != "log" && ext != "log.swap");
            if replaced && matches!(ext, "log" | "index" | "timeindex" | "txnindex") {
                io.storage.remove_file(&dir.join(other))?;
            }
        }
        io.storage
            .rename(&swap, &dir.join(format!("{stem}{LOG_SUFFIX}")))?;
        touched = true;
    }
    if touched {
        io.sync_dir(dir)?;
    }
    Ok(())
}
