//! Transactions in the log: which producers have a transaction open here (from its
//! first transactional batch to its COMMIT/ABORT marker), the last stable offset (LSO:
//! the first offset of the oldest open transaction, else the end) and the `.txnindex`
//! entries of aborted transactions.
//!
//! All of it follows from the batch headers (producer id, transactional and control bits)
//! and the markers' one record, so it is tracked as batches are written and rebuilt on
//! open by rescanning the log from a checkpoint: `txn-checkpoint` holds the open
//! transactions as of a segment base. A snapshot is taken at every roll and written when
//! the recovery point reaches that segment (everything before it is fsynced, its
//! `.txnindex` files included), and at a clean close for the end of the log. So an
//! unclean restart rescans only what recovery rescans anyway, and a clean one nothing.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::{io_err, PartitionLog};
use crate::batch::{self, BatchHeader};
use crate::control::{self, ControlMarker};
use crate::segment::{Io, Segment};
use crate::storage::OpenMode;
use crate::txn_index::AbortedTxnEntry;
use crate::LogError;

pub(super) const TXN_CHECKPOINT_FILE: &str = "txn-checkpoint";

/// Open transactions of one partition.
#[derive(Debug, Default)]
pub(super) struct TxnState {
    /// Producer id → offset of its open transaction's first batch.
    pub ongoing: HashMap<i64, i64>,
    /// Open transactions as of the base of each segment rolled since the last
    /// checkpoint, waiting for the recovery point to reach it.
    pub snapshots: Vec<(i64, HashMap<i64, i64>)>,
}

impl TxnState {
    /// The last stable offset for a log ending at `end`.
    pub(super) fn stable_offset(&self, end: i64) -> i64 {
        self.ongoing.values().copied().fold(end, i64::min)
    }

    /// Accounts one written batch (`marker` read from it when it is a control batch);
    /// returns the `.txnindex` entry when it aborts a transaction.
    pub(super) fn apply(
        &mut self,
        h: &BatchHeader,
        marker: Option<ControlMarker>,
    ) -> Option<AbortedTxnEntry> {
        if !h.is_transactional() || h.producer_id < 0 {
            return None;
        }
        if !h.is_control() {
            self.ongoing.entry(h.producer_id).or_insert(h.base_offset);
            return None;
        }
        let marker = marker?;
        // A marker with no open transaction here still ends one (an empty one at the
        // marker itself), as Kafka records it.
        let first = self.ongoing.remove(&h.producer_id).unwrap_or(h.base_offset);
        if marker.commit {
            return None;
        }
        Some(AbortedTxnEntry {
            producer_id: h.producer_id,
            first_offset: first,
            last_offset: h.base_offset,
            last_stable_offset: self.stable_offset(h.last_offset() + 1),
        })
    }
}

/// The marker of a control batch (`None` for other batches or unknown control types).
pub(super) fn marker_of(h: &BatchHeader, batch: &[u8]) -> Option<ControlMarker> {
    if !h.is_control() {
        return None;
    }
    control::parse_control(batch).ok().flatten()
}

impl PartitionLog {
    /// The last stable offset: below it no transaction is still open.
    pub fn last_stable_offset(&self) -> i64 {
        self.published().stable_offset
    }

    /// Open transactions: (producer id, offset of its first batch here).
    pub fn ongoing_transactions(&self) -> Vec<(i64, i64)> {
        let mut v: Vec<(i64, i64)> = self
            .txn
            .lock()
            .ongoing
            .iter()
            .map(|(&p, &f)| (p, f))
            .collect();
        v.sort_unstable();
        v
    }

    /// Whether `producer_id` has an open transaction here (a transactional batch since its
    /// last marker).
    pub fn has_ongoing_transaction(&self, producer_id: i64) -> bool {
        self.txn.lock().ongoing.contains_key(&producer_id)
    }

    /// The aborted transactions a read of [from, upto) must tell a read-committed
    /// consumer about: those whose marker is at or after `from` and whose first offset
    /// is before `upto`, in marker order.
    pub fn aborted_transactions(&self, from: i64, upto: i64) -> Vec<AbortedTxnEntry> {
        let segs = self.segments.read().clone();
        let k = segs.partition_point(|s| s.base <= from).saturating_sub(1);
        let mut out = Vec::new();
        for seg in &segs[k..] {
            let t = seg.txns.read();
            for e in &t.entries {
                if e.last_offset >= from && e.first_offset < upto {
                    out.push(*e);
                }
                // Later aborts began at or after this one's stable offset.
                if e.last_stable_offset >= upto {
                    return out;
                }
            }
        }
        out
    }

    /// Accounts the batches just written to `seg`; returns the new last stable offset
    /// for a log ending at `end`. Called under the writer lock, before publishing.
    pub(super) fn track_transactions(
        &self,
        seg: &Segment,
        written: impl Iterator<Item = (BatchHeader, Option<ControlMarker>)>,
        end: i64,
    ) -> i64 {
        let mut state = self.txn.lock();
        for (h, marker) in written {
            if let Some(entry) = state.apply(&h, marker) {
                seg.add_aborted(entry);
            }
        }
        state.stable_offset(end)
    }

    /// At a roll: remembers the open transactions as of the new segment's base.
    pub(super) fn snapshot_transactions(&self, base: i64) {
        let mut state = self.txn.lock();
        let ongoing = state.ongoing.clone();
        state.snapshots.push((base, ongoing));
    }

    /// The recovery point may move to `base`: writes the snapshot taken for it. `false`
    /// when there is none and no checkpoint at or past `base` (the recovery point must
    /// then stay where it is: the next recovery would start at `base` knowing no open
    /// transaction).
    pub(super) fn checkpoint_transactions_at(&self, base: i64) -> Result<bool, LogError> {
        let snapshot = {
            let mut state = self.txn.lock();
            let found = state
                .snapshots
                .iter()
                .position(|(b, _)| *b == base)
                .map(|i| state.snapshots[i].1.clone());
            state.snapshots.retain(|(b, _)| *b > base);
            found
        };
        match snapshot {
            Some(ongoing) => write_checkpoint(&self.io, &self.dir, base, &ongoing).map(|()| true),
            // After a clean open the checkpoint written at the close may be past `base`,
            // which serves the next recovery just as well.
            None => Ok(read_checkpoint(&self.io, &self.dir).is_some_and(|(at, _)| at >= base)),
        }
    }

    /// Writes the open transactions as of the end of the log (at a clean close).
    pub(super) fn checkpoint_transactions_at_end(&self) -> Result<(), LogError> {
        let end = self.published().end_offset;
        let ongoing = self.txn.lock().ongoing.clone();
        write_checkpoint(&self.io, &self.dir, end, &ongoing)
    }

    /// After the tail was cut at `end`: drops the `.txnindex` entries of markers that
    /// are gone and rebuilds the open transactions by rescanning the log from its start
    /// (truncation is rare). Returns the new last stable offset.
    pub(super) fn rebuild_transactions_after_cut(
        &self,
        segs: &[Arc<Segment>],
        end: i64,
    ) -> Result<i64, LogError> {
        let path = self.dir.join(TXN_CHECKPOINT_FILE);
        if let Err(e) = self.io.storage.remove_file(&path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(io_err(&path)(e));
            }
        }
        let mut state = TxnState::default();
        if let Some(first) = segs.first() {
            rescan(segs, first.base, &mut state, end)?;
        }
        let stable = state.stable_offset(end);
        *self.txn.lock() = state;
        // The rescan took fresh snapshots: a base refused before may have one now.
        self.no_checkpoint_at
            .store(i64::MIN, std::sync::atomic::Ordering::Release);
        Ok(stable)
    }
}

/// At open: loads each segment's `.txnindex`, then rebuilds the open transactions from
/// the checkpoint (or, without a usable one, from `fallback`, a segment base) by
/// rescanning the batches after it, rewriting the `.txnindex` entries found there.
pub(super) fn recover_transactions(
    io: &Io,
    dir: &Path,
    segs: &[Arc<Segment>],
    end: i64,
    fallback: i64,
) -> Result<TxnState, LogError> {
    for seg in segs {
        let entries = crate::txn_index::load(io, &seg.txn_path).map_err(io_err(&seg.txn_path))?;
        let mut t = seg.txns.write();
        t.persisted = entries.len();
        t.entries = entries;
    }
    let first = segs.first().map_or(end, |s| s.base);
    let (from, ongoing) = match read_checkpoint(io, dir) {
        Some((at, ongoing)) if at >= first && at <= end => (at, ongoing),
        _ => (fallback.clamp(first, end), HashMap::new()),
    };
    let mut state = TxnState {
        ongoing,
        snapshots: Vec::new(),
    };
    rescan(segs, from, &mut state, end)?;
    // The cleaner only compacts what is below the last stable offset, so a transaction
    // starting below its first dirty offset had ended before that pass; and once its
    // data is gone the cleaner removes its marker, which a rescan from an older
    // checkpoint would then miss. Such a transaction is not open.
    let cleaned = crate::cleaner::checkpoint::first_dirty(io, dir);
    if cleaned <= end {
        state.ongoing.retain(|_, first| *first >= cleaned);
        for (_, ongoing) in &mut state.snapshots {
            ongoing.retain(|_, first| *first >= cleaned);
        }
    }
    Ok(state)
}

/// Replays the batches from offset `from` (a batch boundary) to `end` into `state`,
/// replacing the `.txnindex` entries of markers at or after `from`.
fn rescan(
    segs: &[Arc<Segment>],
    from: i64,
    state: &mut TxnState,
    end: i64,
) -> Result<(), LogError> {
    if from >= end {
        return Ok(());
    }
    let k = segs.partition_point(|s| s.base <= from).saturating_sub(1);
    for seg in &segs[k..] {
        // The open transactions as of each rescanned segment's base: the checkpoint written
        // when the recovery point moves there must hold them (a transaction open across the
        // base would otherwise be forgotten by the next recovery, which starts there).
        if seg.base >= from {
            state.snapshots.push((seg.base, state.ongoing.clone()));
        }
        let mut entries: Vec<AbortedTxnEntry> = seg
            .txns
            .read()
            .entries
            .iter()
            .filter(|e| e.last_offset < from)
            .copied()
            .collect();
        let before = seg.txns.read().entries.clone();
        let size = seg.size();
        let start = match seg.find(from, size).map_err(io_err(&seg.log_path))? {
            Some((pos, _)) => pos,
            None => size,
        };
        let file = seg.file().map_err(io_err(&seg.log_path))?;
        let mut failed: Option<std::io::Error> = None;
        crate::segment::scan(
            &file,
            start,
            size,
            None,
            usize::MAX,
            false,
            |pos, h, len| {
                if !h.is_transactional() {
                    return;
                }
                let marker = if h.is_control() {
                    let mut buf = vec![0u8; len as usize];
                    if let Err(e) = file.read_exact_at(&mut buf, pos) {
                        failed.get_or_insert(e);
                        return;
                    }
                    marker_of(h, &buf)
                } else {
                    None
                };
                if let Some(e) = state.apply(h, marker) {
                    entries.push(e);
                }
            },
        )
        .map_err(io_err(&seg.log_path))?;
        if let Some(e) = failed {
            return Err(io_err(&seg.log_path)(e));
        }
        if entries != before {
            seg.replace_txns(entries).map_err(io_err(&seg.txn_path))?;
        }
    }
    Ok(())
}

/// `txn-checkpoint`: the offset, then one `producer_id first_offset` line per open
/// transaction. Written to a temporary file, fsynced and renamed over the old one, and the
/// directory fsynced.
fn write_checkpoint(
    io: &Io,
    dir: &Path,
    at: i64,
    ongoing: &HashMap<i64, i64>,
) -> Result<(), LogError> {
    let tmp = dir.join(format!("{TXN_CHECKPOINT_FILE}.tmp"));
    let path = dir.join(TXN_CHECKPOINT_FILE);
    let mut text = format!("{at}\n");
    let mut open: Vec<(&i64, &i64)> = ongoing.iter().collect();
    open.sort_unstable();
    for (p, f) in open {
        text.push_str(&format!("{p} {f}\n"));
    }
    let f = io
        .open(&tmp, OpenMode::CreateTruncate)
        .map_err(io_err(&tmp))?;
    io.storage
        .write_at(&f, &[text.as_bytes()], 0)
        .and_then(|()| io.storage.sync_data(&f))
        .map_err(io_err(&tmp))?;
    drop(f);
    io.storage.rename(&tmp, &path).map_err(io_err(&path))?;
    // The rename is durable only with the directory: the recovery point written next must
    // not survive a power cut without the checkpoint it relies on.
    io.sync_dir(dir).map_err(io_err(dir))
}

fn read_checkpoint(io: &Io, dir: &Path) -> Option<(i64, HashMap<i64, i64>)> {
    let bytes = io.read_opt(&dir.join(TXN_CHECKPOINT_FILE)).ok()??;
    let text = std::str::from_utf8(&bytes).ok()?;
    let mut lines = text.lines();
    let at: i64 = lines.next()?.trim().parse().ok()?;
    let mut ongoing = HashMap::new();
    for line in lines {
        let (p, f) = line.trim().split_once(' ')?;
        ongoing.insert(p.parse().ok()?, f.parse().ok()?);
    }
    Some((at, ongoing))
}

/// The header and marker of a batch about to be written (its base offset assigned).
pub(super) fn written_batch(buf: &[u8]) -> Option<(BatchHeader, Option<ControlMarker>)> {
    let h = batch::parse_header(buf).ok()?;
    if !h.is_transactional() {
        return None;
    }
    Some((h, marker_of(&h, buf)))
}
