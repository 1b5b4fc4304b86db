//! A segment's aborted-transaction index, `.txnindex`, in Kafka's file layout: 34-byte
//! entries (version i16 = 0, producer id i64, first offset i64, last offset i64, last
//! stable offset i64, big endian), one per transaction aborted by a marker in the segment
//! (`last offset` is the ABORT marker's offset), in marker order.
//!
//! Read-committed fetches send the entries overlapping the fetched range so clients drop
//! the aborted records. The entries of a segment are kept in memory (a few per aborted
//! transaction) and each is written to the file as its marker is appended; the file is
//! created only when the segment gets its first entry, as Kafka does. Recovery rebuilds
//! the entries of the segments it rescans, so a torn file is repaired from the log.

use std::path::Path;

use crate::segment::Io;
use crate::storage::OpenMode;

pub(crate) const TXNINDEX_SUFFIX: &str = ".txnindex";
pub(crate) const ENTRY_LEN: usize = 34;
const VERSION: i16 = 0;

/// One aborted transaction of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxnEntry {
    pub producer_id: i64,
    /// Offset of the transaction's first batch in this partition.
    pub first_offset: i64,
    /// Offset of the ABORT marker.
    pub last_offset: i64,
    /// The partition's last stable offset once this transaction was aborted.
    pub last_stable_offset: i64,
}

impl AbortedTxnEntry {
    pub(crate) fn encode(&self) -> [u8; ENTRY_LEN] {
        let mut b = [0u8; ENTRY_LEN];
        b[0..2].copy_from_slice(&VERSION.to_be_bytes());
        b[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Option<AbortedTxnEntry> {
        let b: &[u8; ENTRY_LEN] = b.get(..ENTRY_LEN)?.try_into().ok()?;
        let i64_at = |at: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[at..at + 8]);
            i64::from_be_bytes(a)
        };
        if i16::from_be_bytes([b[0], b[1]]) != VERSION {
            return None;
        }
        Some(AbortedTxnEntry {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        })
    }
}

/// The entries of a `.txnindex` file (none if it does not exist). Reading stops at a
/// torn or unknown entry, or one breaking marker order.
pub(crate) fn load(io: &Io, path: &Path) -> std::io::Result<Vec<AbortedTxnEntry>> {
    let Some(bytes) = io.read_opt(path)? else {
        return Ok(Vec::new());
    };
    let mut out: Vec<AbortedTxnEntry> = Vec::with_capacity(bytes.len() / ENTRY_LEN);
    for chunk in bytes.chunks_exact(ENTRY_LEN) {
        let Some(e) = AbortedTxnEntry::decode(chunk) else {
            break;
        };
        if out.last().is_some_and(|l| l.last_offset >= e.last_offset) {
            break;
        }
        out.push(e);
    }
    Ok(out)
}

/// Writes one entry as the `index`-th of the file (creating it if needed).
pub(crate) fn write_entry(
    io: &Io,
    path: &Path,
    index: usize,
    entry: &AbortedTxnEntry,
) -> std::io::Result<()> {
    let f = io.open(path, OpenMode::Create)?;
    io.storage
        .write_at(&f, &[&entry.encode()], (index * ENTRY_LEN) as u64)
}

/// Replaces the file with `entries` (removing it when there are none).
pub(crate) fn rewrite(io: &Io, path: &Path, entries: &[AbortedTxnEntry]) -> std::io::Result<()> {
    if entries.is_empty() {
        return match io.storage.remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    let f = io.open(path, OpenMode::CreateTruncate)?;
    let buf: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
    io.storage.write_at(&f, &[&buf], 0)?;
    // Rewritten for a segment that may already be below the recovery point (recovery's
    // rescan, compaction): nothing else fsyncs it later, and a lost entry would show an
    // aborted transaction's records to read-committed readers.
    io.storage.sync_data(&f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Storage;

    fn io() -> Io {
        Io {
            storage: Storage::real(),
            files: crate::OpenFiles::new(64),
        }
    }

    #[test]
    fn entries_round_trip_in_kafkas_layout() {
        let e = AbortedTxnEntry {
            producer_id: 7,
            first_offset: 10,
            last_offset: 20,
            last_stable_offset: 21,
        };
        let b = e.encode();
        assert_eq!(b.len(), 34);
        assert_eq!(&b[0..2], &[0, 0]);
        assert_eq!(&b[2..10], &7i64.to_be_bytes());
        assert_eq!(&b[26..34], &21i64.to_be_bytes());
        assert_eq!(AbortedTxnEntry::decode(&b), Some(e));
    }

    #[test]
    fn file_round_trip_ignores_a_torn_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("00000000000000000000.txnindex");
        let io = io();
        assert!(load(&io, &path).expect("load").is_empty());
        let entries: Vec<AbortedTxnEntry> = (0..3)
            .map(|i| AbortedTxnEntry {
                producer_id: i,
                first_offset: i * 10,
                last_offset: i * 10 + 5,
                last_stable_offset: i * 10 + 6,
            })
            .collect();
        for (i, e) in entries.iter().enumerate() {
            write_entry(&io, &path, i, e).expect("write");
        }
        assert_eq!(load(&io, &path).expect("load"), entries);
        // A torn last entry is ignored.
        let mut bytes = std::fs::read(&path).expect("read");
        bytes.truncate(2 * ENTRY_LEN + 10);
        std::fs::write(&path, &bytes).expect("write");
        assert_eq!(load(&io, &path).expect("load"), entries[..2]);
        rewrite(&io, &path, &entries[..1]).expect("rewrite");
        assert_eq!(load(&io, &path).expect("load"), entries[..1]);
        rewrite(&io, &path, &[]).expect("rewrite");
        assert!(!path.exists());
    }
}
