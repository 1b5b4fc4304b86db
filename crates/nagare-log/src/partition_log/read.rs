//! Reading: whole batches from an offset for fetches (as file ranges, for sendfile), and
//! lookups by timestamp. Readers see only what `append` published.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::{io_err, FileSlice, PartitionLog, ReadResult};
use crate::batch::{self, LOG_OVERHEAD};
use crate::segment::Segment;
use crate::LogError;

impl PartitionLog {
    /// Whole batches from the one containing `offset`, up to about `max_bytes` (at least
    /// one batch is returned even if larger). `offset == log_end_offset` returns nothing;
    /// outside [log_start_offset, log_end_offset] is `OffsetOutOfRange`.
    pub fn read(&self, offset: i64, max_bytes: u64) -> Result<ReadResult, LogError> {
        self.read_within(offset, max_bytes, false)
    }

    /// Same as `read`, but only batches below the last stable offset (what a
    /// read-committed consumer may be sent: no batch of a still open transaction).
    pub fn read_committed(&self, offset: i64, max_bytes: u64) -> Result<ReadResult, LogError> {
        self.read_within(offset, max_bytes, true)
    }

    fn read_within(
        &self,
        offset: i64,
        max_bytes: u64,
        committed: bool,
    ) -> Result<ReadResult, LogError> {
        let mut p = self.published();
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
            last_stable_offset: p.stable_offset,
            next_offset: offset,
            ..Default::default()
        };
        let segs = self.segments.read();
        if committed && p.stable_offset < p.end_offset {
            if offset >= p.stable_offset {
                return Ok(res);
            }
            // Read as if the log ended at the stable offset: it is a batch boundary (an
            // open transaction's first batch).
            let stable = p.stable_offset;
            let k = segs.partition_point(|s| s.base <= stable).saturating_sub(1);
            let Some(seg) = segs.get(k) else {
                return Ok(res);
            };
            let limit = if seg.base == p.active_base {
                p.active_size
            } else {
                seg.size()
            };
            let pos = seg
                .find(stable, limit)
                .map_err(io_err(&seg.log_path))?
                .map_or(limit, |(pos, _)| pos);
            p.end_offset = stable;
            p.active_base = seg.base;
            p.active_size = pos;
        }
        if offset == p.end_offset {
            return Ok(res);
        }
        let k = segs.partition_point(|s| s.base <= offset).saturating_sub(1);
        let mut budget = max_bytes;
        let mut copied: Vec<u8> = Vec::new();
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
                seg.file()
                    .and_then(|f| f.read_exact_at(&mut head, 0))
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
            let file = seg.file().map_err(io_err(&seg.log_path))?;
            // Once one slice is refused, the rest is copied too so the order holds.
            let lent = if copied.is_empty() {
                self.io.files.lend()
            } else {
                None
            };
            match lent {
                Some(lent) => res.slices.push(FileSlice {
                    file,
                    position: pos,
                    len: len as u32,
                    _lent: Arc::new(lent),
                }),
                None => {
                    let at = copied.len();
                    copied.resize(at + len as usize, 0);
                    file.read_exact_at(&mut copied[at..], pos)
                        .map_err(io_err(&seg.log_path))?;
                }
            }
            res.total_bytes += len;
            budget = budget.saturating_sub(len);
            res.next_offset = if end < limit {
                // The batch after the range starts there: its base offset.
                seg.file()
                    .ok()
                    .and_then(|f| next_base(&f, end))
                    .unwrap_or(offset)
            } else if seg.base == p.active_base {
                p.end_offset
            } else {
                // A rolled segment read to its end: the next one starts where it ended.
                next_segment_base(&segs, seg.base).unwrap_or(p.end_offset)
            };
            if budget == 0 || end < limit {
                break;
            }
        }
        res.copied = Bytes::from(copied);
        Ok(res)
    }

    /// Same as `read` but copies the batches into memory, one `Bytes` per batch.
    pub fn read_batches(&self, offset: i64, max_bytes: u64) -> Result<Vec<Bytes>, LogError> {
        self.copy_batches(self.read(offset, max_bytes)?)
    }

    /// Same as `read_committed` but copies the batches into memory, one `Bytes` each.
    pub fn read_committed_batches(
        &self,
        offset: i64,
        max_bytes: u64,
    ) -> Result<Vec<Bytes>, LogError> {
        self.copy_batches(self.read_committed(offset, max_bytes)?)
    }

    fn copy_batches(&self, res: ReadResult) -> Result<Vec<Bytes>, LogError> {
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
        for r in batch::split_batches(&res.copied)? {
            out.push(res.copied.slice(r));
        }
        Ok(out)
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
            seg.file().ok()?.read_exact_at(&mut buf, pos).ok()?;
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
                .file()
                .and_then(|f| f.read_exact_at(&mut buf, pos))
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
}

/// The base offset of the batch at `pos` (its first 8 bytes).
fn next_base(file: &File, pos: u64) -> Option<i64> {
    let mut head = [0u8; 8];
    file.read_exact_at(&mut head, pos).ok()?;
    Some(i64::from_be_bytes(head))
}

fn next_segment_base(segs: &[Arc<Segment>], base: i64) -> Option<i64> {
    segs.iter().map(|s| s.base).find(|b| *b > base)
}
