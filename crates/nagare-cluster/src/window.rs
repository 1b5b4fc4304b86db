//! The window of one followed partition: the most recent records the gateway read from
//! the cluster, shared by every local reader of the partition (each reads at its own
//! offset). It holds every record the cluster gave for offsets `[start, end)`, and at
//! most a bounded number of bytes and records: the oldest go first, and a reader that
//! falls behind `start` reads from the cluster until it catches up.
//!
//! Offsets may have gaps (transaction markers, aborted or compacted records): a read
//! from an offset in a gap starts at the next record.

use std::collections::VecDeque;

use nagare_core::log::batch::Record;
use nagare_core::RecordsRead;

/// Bytes of the window of one partition at most (counted as keys, values and headers).
pub(crate) const WINDOW_BYTES: usize = 8 << 20;
/// Records of the window of one partition at most.
pub(crate) const WINDOW_RECORDS: usize = 20_000;

/// What the window says about a read.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// Records from the offset (none when only a gap lies between it and the end).
    Hit(RecordsRead),
    /// The offset is at or beyond the end: nothing yet.
    Ahead,
    /// The offset is before the window: read it from the cluster.
    Behind,
}

#[derive(Debug)]
pub(crate) struct Window {
    start: i64,
    end: i64,
    records: VecDeque<Record>,
    bytes: usize,
    max_bytes: usize,
    max_records: usize,
}

/// What a record weighs in the window.
fn weight(r: &Record) -> usize {
    64 + r.key.as_ref().map_or(0, |k| k.len())
        + r.value.as_ref().map_or(0, |v| v.len())
        + r.headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len()))
            .sum::<usize>()
}

impl Window {
    /// An empty window at `at`: the records to come start there.
    pub(crate) fn new(at: i64, max_bytes: usize, max_records: usize) -> Window {
        Window {
            start: at,
            end: at,
            records: VecDeque::new(),
            bytes: 0,
            max_bytes: max_bytes.max(1),
            max_records: max_records.max(1),
        }
    }

    #[cfg(test)]
    fn start(&self) -> i64 {
        self.start
    }

    pub(crate) fn end(&self) -> i64 {
        self.end
    }

    /// Empties the window and starts it again at `at`.
    pub(crate) fn reset(&mut self, at: i64) {
        self.records.clear();
        self.bytes = 0;
        self.start = at;
        self.end = at;
    }

    /// Adds the next record the cluster gave. One before the end means the reader was
    /// moved back (the partition was recreated or truncated): the window starts again.
    pub(crate) fn push(&mut self, r: Record) {
        if r.offset < self.end {
            self.reset(r.offset);
        }
        self.end = r.offset + 1;
        self.bytes += weight(&r);
        self.records.push_back(r);
        while self.bytes > self.max_bytes || self.records.len() > self.max_records {
            let Some(old) = self.records.pop_front() else {
                break;
            };
            self.bytes -= weight(&old);
            self.start = old.offset + 1;
        }
    }

    /// Records from `offset` on, about `max_bytes` of them (at least one).
    pub(crate) fn read(&self, offset: i64, max_bytes: u64) -> Lookup {
        if offset >= self.end {
            return Lookup::Ahead;
        }
        if offset < self.start {
            return Lookup::Behind;
        }
        let first = self.records.partition_point(|r| r.offset < offset);
        let mut out = RecordsRead {
            records: Vec::new(),
            next_offset: self.end,
            batch_ends: Vec::new(),
        };
        let mut bytes = 0u64;
        for r in self.records.range(first..) {
            if !out.records.is_empty() && bytes >= max_bytes {
                out.next_offset = r.offset;
                break;
            }
            bytes += weight(r) as u64;
            // The window holds records, not batches (librdkafka unpacks them): each
            // counts as a batch of its own, so a batch-optimized acquisition stays strict.
            out.batch_ends.push(r.offset);
            out.records.push(r.clone());
        }
        Lookup::Hit(out)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn rec(offset: i64, size: usize) -> Record {
        Record {
            offset,
            timestamp: 0,
            key: None,
            value: Some(Bytes::from(vec![b'x'; size])),
            headers: vec![],
        }
    }

    fn offsets(l: Lookup) -> (Vec<i64>, i64) {
        match l {
            Lookup::Hit(r) => (r.records.iter().map(|r| r.offset).collect(), r.next_offset),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reads_within_ahead_of_and_behind_the_window() {
        let mut w = Window::new(10, 1 << 20, 100);
        assert!(matches!(w.read(10, 100), Lookup::Ahead));
        assert!(matches!(w.read(9, 100), Lookup::Behind));
        for o in [10, 11, 14, 15] {
            w.push(rec(o, 10));
        }
        assert_eq!(offsets(w.read(10, 1 << 20)), (vec![10, 11, 14, 15], 16));
        // From inside a gap: the next record.
        assert_eq!(offsets(w.read(12, 1 << 20)), (vec![14, 15], 16));
        // At least one record however small the budget, and the next offset after it.
        assert_eq!(offsets(w.read(11, 1)), (vec![11], 14));
        assert!(matches!(w.read(16, 100), Lookup::Ahead));
    }

    #[test]
    fn the_oldest_records_leave_first_and_readers_behind_read_elsewhere() {
        let mut w = Window::new(0, 300, 1000);
        for o in 0..10 {
            w.push(rec(o, 36)); // 100 bytes each with the overhead
        }
        assert_eq!((w.start(), w.end()), (7, 10));
        assert!(matches!(w.read(6, 100), Lookup::Behind));
        assert_eq!(offsets(w.read(7, 1 << 20)).0, vec![7, 8, 9]);
        let mut w = Window::new(0, 1 << 30, 2);
        for o in 0..5 {
            w.push(rec(o, 1));
        }
        assert_eq!((w.start(), w.end()), (3, 5));
    }

    #[test]
    fn a_record_before_the_end_starts_the_window_again() {
        let mut w = Window::new(100, 1 << 20, 100);
        w.push(rec(100, 1));
        w.push(rec(101, 1));
        w.push(rec(5, 1));
        assert_eq!((w.start(), w.end()), (5, 6));
        assert_eq!(offsets(w.read(5, 100)).0, vec![5]);
    }
}
