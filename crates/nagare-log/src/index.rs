//! A segment's sparse indexes, in Kafka's file layout:
//! `.index` holds 8-byte entries (relative offset u32, file position u32, big endian) and
//! `.timeindex` 12-byte entries (timestamp i64, relative offset u32).
//!
//! The entries live in memory (the authority while the log runs); new entries are written
//! to the files lazily (on roll, flush and close) so an append stays one `write`. A crash
//! leaves the active segment's files behind, which is why recovery rebuilds them.

use std::path::Path;

use crate::segment::Io;
use crate::storage::OpenMode;

pub(crate) const OFFSET_ENTRY: usize = 8;
pub(crate) const TIME_ENTRY: usize = 12;

/// Sparse offset and time index of one segment, plus what the writer needs to extend them.
#[derive(Debug, Default)]
pub(crate) struct Indexes {
    /// (offset - base, position of the batch holding it), both increasing.
    pub offsets: Vec<(u32, u32)>,
    /// (largest timestamp so far, offset - base of the batch that set it), both increasing.
    pub times: Vec<(i64, u32)>,
    /// Entries already in the files.
    offsets_persisted: usize,
    times_persisted: usize,
    /// Largest batch max timestamp in the segment and the last offset of that batch.
    pub max_timestamp: Option<(i64, i64)>,
    /// Bytes appended since the last offset index entry.
    pub bytes_since_entry: u64,
}

impl Indexes {
    /// Accounts one batch appended at `position`; adds index entries every
    /// `interval` bytes, as Kafka does.
    pub(crate) fn on_append(
        &mut self,
        base: i64,
        position: u64,
        len: u64,
        last_offset: i64,
        max_timestamp: i64,
        interval: u32,
    ) {
        if self.max_timestamp.is_none_or(|(ts, _)| max_timestamp > ts) {
            self.max_timestamp = Some((max_timestamp, last_offset));
        }
        if self.bytes_since_entry >= interval as u64 {
            self.offsets
                .push(((last_offset - base) as u32, position as u32));
            self.maybe_add_time_entry(base);
            self.bytes_since_entry = 0;
        }
        self.bytes_since_entry += len;
    }

    /// Adds a time entry for the current maximum if it is newer than the last one (also
    /// done when a segment stops being active, so its maximum is in the file).
    pub(crate) fn maybe_add_time_entry(&mut self, base: i64) {
        if let Some((ts, off)) = self.max_timestamp {
            if self.times.last().is_none_or(|&(last, _)| ts > last) {
                self.times.push((ts, (off - base) as u32));
            }
        }
    }

    /// Position from which to scan for `offset`: the batch of the last entry at or
    /// below it, else the segment start.
    pub(crate) fn lookup(&self, base: i64, offset: i64) -> u64 {
        let rel = offset - base;
        if rel < 0 {
            return 0;
        }
        let i = self.offsets.partition_point(|&(o, _)| (o as i64) <= rel);
        if i == 0 {
            0
        } else {
            self.offsets[i - 1].1 as u64
        }
    }

    /// Largest known batch start at or below `limit` (a batch boundary), if any.
    pub(crate) fn boundary_at_or_below(&self, limit: u64) -> Option<u64> {
        let i = self.offsets.partition_point(|&(_, p)| p as u64 <= limit);
        (i > 0).then(|| self.offsets[i - 1].1 as u64)
    }

    /// Offset from which to scan for the first batch whose max timestamp is >= `ts`.
    pub(crate) fn time_lookup(&self, base: i64, ts: i64) -> i64 {
        let i = self.times.partition_point(|&(t, _)| t < ts);
        if i == 0 {
            base
        } else {
            base + self.times[i - 1].1 as i64
        }
    }

    /// Writes entries not yet in the files, each at its own position, so entries
    /// after a failed write replace whatever it left.
    pub(crate) fn persist(
        &mut self,
        io: &Io,
        index: &Path,
        timeindex: &Path,
    ) -> std::io::Result<()> {
        if self.offsets_persisted < self.offsets.len() {
            let mut buf = Vec::with_capacity((self.offsets.len() - self.offsets_persisted) * 8);
            for &(o, p) in &self.offsets[self.offsets_persisted..] {
                buf.extend_from_slice(&o.to_be_bytes());
                buf.extend_from_slice(&p.to_be_bytes());
            }
            let at = (self.offsets_persisted * OFFSET_ENTRY) as u64;
            write_entries(io, index, &buf, at)?;
            self.offsets_persisted = self.offsets.len();
        }
        if self.times_persisted < self.times.len() {
            let mut buf = Vec::with_capacity((self.times.len() - self.times_persisted) * 12);
            for &(t, o) in &self.times[self.times_persisted..] {
                buf.extend_from_slice(&t.to_be_bytes());
                buf.extend_from_slice(&o.to_be_bytes());
            }
            let at = (self.times_persisted * TIME_ENTRY) as u64;
            write_entries(io, timeindex, &buf, at)?;
            self.times_persisted = self.times.len();
        }
        Ok(())
    }

    /// Replaces both files with the in-memory entries.
    pub(crate) fn rewrite(
        &mut self,
        io: &Io,
        index: &Path,
        timeindex: &Path,
    ) -> std::io::Result<()> {
        io.open(index, OpenMode::CreateTruncate)?;
        io.open(timeindex, OpenMode::CreateTruncate)?;
        self.offsets_persisted = 0;
        self.times_persisted = 0;
        self.persist(io, index, timeindex)
    }

    /// Loads both files; `None` when either is missing or inconsistent with a segment of
    /// `segment_len` bytes (then the caller rebuilds them from the log).
    pub(crate) fn load(
        io: &Io,
        index: &Path,
        timeindex: &Path,
        segment_len: u64,
    ) -> std::io::Result<Option<Self>> {
        let (Some(ob), Some(tb)) = (io.read_opt(index)?, io.read_opt(timeindex)?) else {
            return Ok(None);
        };
        if ob.len() % OFFSET_ENTRY != 0 || tb.len() % TIME_ENTRY != 0 {
            return Ok(None);
        }
        let offsets: Vec<(u32, u32)> = ob
            .chunks_exact(OFFSET_ENTRY)
            .map(|c| {
                (
                    u32::from_be_bytes([c[0], c[1], c[2], c[3]]),
                    u32::from_be_bytes([c[4], c[5], c[6], c[7]]),
                )
            })
            .collect();
        let times: Vec<(i64, u32)> = tb
            .chunks_exact(TIME_ENTRY)
            .map(|c| {
                let mut t = [0u8; 8];
                t.copy_from_slice(&c[..8]);
                (
                    i64::from_be_bytes(t),
                    u32::from_be_bytes([c[8], c[9], c[10], c[11]]),
                )
            })
            .collect();
        let increasing = offsets
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1)
            && offsets
                .last()
                .is_none_or(|&(_, p)| (p as u64) < segment_len)
            && times
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1);
        if !increasing {
            return Ok(None);
        }
        let n = (offsets.len(), times.len());
        Ok(Some(Indexes {
            offsets,
            times,
            offsets_persisted: n.0,
            times_persisted: n.1,
            max_timestamp: None,
            bytes_since_entry: 0,
        }))
    }
}

/// Writes index entries at `at`, dropping anything a failed earlier write left after them.
fn write_entries(io: &Io, path: &Path, buf: &[u8], at: u64) -> std::io::Result<()> {
    let f = io.open(path, OpenMode::Create)?;
    if f.metadata()?.len() != at {
        io.storage.set_len(&f, at)?;
    }
    io.storage.write_at(&f, &[buf], at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::open_files::OpenFiles;
    use crate::storage::Storage;

    #[test]
    fn entries_follow_the_interval_and_round_trip_through_files() {
        let dir = tempfile::tempdir().unwrap();
        let (ip, tp) = (dir.path().join("a.index"), dir.path().join("a.timeindex"));
        let io = Io {
            storage: Storage::real(),
            files: OpenFiles::new(8),
        };
        let mut idx = Indexes::default();
        // 10 batches of 100 bytes, 3 offsets each, base 1000, interval 250.
        for i in 0..10u64 {
            let last = 1000 + 3 * i as i64 + 2;
            idx.on_append(1000, i * 100, 100, last, 50 + (i as i64 % 4) * 10, 250);
        }
        assert_eq!(idx.offsets, vec![(11, 300), (20, 600), (29, 900)]);
        assert_eq!(idx.times, vec![(80, 11)]);
        assert_eq!(idx.max_timestamp, Some((80, 1011)));
        assert_eq!(idx.lookup(1000, 1005), 0);
        assert_eq!(idx.lookup(1000, 1011), 300);
        assert_eq!(idx.lookup(1000, 1019), 300);
        assert_eq!(idx.lookup(1000, 1022), 600);
        assert_eq!(idx.lookup(1000, 1029), 900);
        assert_eq!(idx.boundary_at_or_below(699), Some(600));
        assert_eq!(idx.boundary_at_or_below(299), None);
        assert_eq!(idx.time_lookup(1000, 80), 1000);
        assert_eq!(idx.time_lookup(1000, 81), 1011);
        idx.persist(&io, &ip, &tp).unwrap();
        idx.maybe_add_time_entry(1000);
        idx.persist(&io, &ip, &tp).unwrap();
        assert_eq!(std::fs::metadata(&ip).unwrap().len(), 24);
        let loaded = Indexes::load(&io, &ip, &tp, 1000).unwrap().unwrap();
        assert_eq!(loaded.offsets, idx.offsets);
        assert_eq!(loaded.times, idx.times);
        // Inconsistent with a shorter segment, or torn: refused.
        assert!(Indexes::load(&io, &ip, &tp, 900).unwrap().is_none());
        std::fs::write(&ip, [0u8; 7]).unwrap();
        assert!(Indexes::load(&io, &ip, &tp, 1000).unwrap().is_none());
        std::fs::remove_file(&tp).unwrap();
        assert!(Indexes::load(&io, &ip, &tp, 1000).unwrap().is_none());
    }
}
