//! The one reader of decoded records: STOMP topic subscriptions, queues and internal-log
//! replay all read through [`Partition::records_from`], so they share one policy for what
//! the log cannot give back.
//!
//! **Corrupt batches.** A batch whose framing is sound but whose records cannot be
//! decoded (a CRC mismatch from disk corruption, an unknown compression codec) is
//! skipped with a warning naming the partition and its offsets: its offsets are passed
//! over as if they held no records, the way Kafka's control batches are, so one bad batch
//! never stops a reader or a replay. Data that cannot even be framed (a batch length that
//! runs past the segment) is an error: there is no next batch to go on from, and recovery
//! at startup is what truncates such a tail.
//!
//! Offsets below the log start (removed by retention or trimming) read from the log
//! start; nothing waits at or beyond the log end.
//!
//! **Transactions.** Every reader here reads committed data only, as a Kafka consumer
//! with `isolation.level=read_committed` does: it stops at the last stable offset (an
//! open transaction's records wait for its marker), passes over control batches (the
//! markers decode to no records) and skips the batches of aborted transactions (from the
//! `.txnindex`: a producer's transactional batches from an aborted transaction's first
//! offset up to its ABORT marker).

use nagare_log::batch::{decode_records, parse_header, BatchHeader, Record};
use nagare_log::AbortedTxnEntry;
use nagare_log::LogError;

use super::{Partition, Store};
use crate::CoreError;

/// Decoded records in offset order and the offset to read next (one past the last batch
/// read, which may be beyond the last record: a batch's trailing offsets can be empty).
#[derive(Debug, Default)]
pub struct RecordsRead {
    pub records: Vec<Record>,
    pub next_offset: i64,
    /// The last offset of each batch `records` came from, in order.
    pub batch_ends: Vec<i64>,
}

impl Partition {
    /// Records from `offset` on, about `max_bytes` of batches (at least one batch).
    /// Blocking only as far as a page-cache read is (see the crate docs); replays of a
    /// whole log belong on the blocking pool.
    pub fn records_from(&self, offset: i64, max_bytes: u64) -> Result<RecordsRead, CoreError> {
        let log = match &self.store {
            Store::Local(log) => log,
            Store::Remote(remote) => return Ok(remote.read_window(offset, max_bytes)),
        };
        let mut from = offset.max(self.log_start_offset());
        // Retention may move the start between the two reads: try again from there.
        let batches = loop {
            match log.read_committed_batches(from, max_bytes) {
                Ok(b) => break b,
                Err(LogError::OffsetOutOfRange { start, .. }) if start > from => from = start,
                Err(LogError::OffsetOutOfRange { .. }) => {
                    return Ok(RecordsRead {
                        records: Vec::new(),
                        next_offset: offset.max(from),
                        batch_ends: Vec::new(),
                    })
                }
                Err(e) => return Err(self.core_error(e)),
            }
        };
        let mut out = RecordsRead {
            records: Vec::new(),
            next_offset: from,
            batch_ends: Vec::new(),
        };
        let mut aborted: Option<Vec<AbortedTxnEntry>> = None;
        for b in &batches {
            let header = parse_header(b).map_err(|e| self.core_error(e.into()))?;
            let last = header.last_offset();
            if last < from {
                continue;
            }
            if header.is_transactional() && !header.is_control() {
                // Looked up once per read, and only when a transaction is in range.
                let upto = batches
                    .last()
                    .and_then(|b| parse_header(b).ok())
                    .map_or(last + 1, |h| h.last_offset() + 1);
                let aborted = aborted.get_or_insert_with(|| log.aborted_transactions(from, upto));
                if is_aborted(&header, aborted) {
                    out.next_offset = out.next_offset.max(last + 1);
                    continue;
                }
            }
            match decode_records(b) {
                Ok(records) => {
                    out.records
                        .extend(records.into_iter().filter(|r| r.offset >= from));
                    out.batch_ends.push(last);
                }
                Err(e) => tracing::warn!(
                    topic = %self.topic,
                    partition = self.index,
                    base_offset = header.base_offset,
                    last_offset = last,
                    error = %e,
                    "skipping an undecodable record batch"
                ),
            }
            out.next_offset = out.next_offset.max(last + 1);
        }
        Ok(out)
    }

    /// Records from `offset` on, like [`records_from`](Self::records_from), for readers
    /// that can wait: a cluster's partition reads what its window of recent records
    /// does not hold from the cluster. The embedded log reads at once.
    pub async fn read_records(
        &self,
        offset: i64,
        max_bytes: u64,
    ) -> Result<RecordsRead, CoreError> {
        match &self.store {
            Store::Local(_) => self.records_from(offset, max_bytes),
            Store::Remote(remote) => remote.read(offset, max_bytes).await,
        }
    }

    /// Makes the offsets current before a reader picks where to start: nothing to do for
    /// the embedded log; a cluster's partition asks the cluster and starts following
    /// it, so that what is appended from now on reaches the reader.
    pub async fn prepare_read(&self) -> Result<(), CoreError> {
        match &self.store {
            Store::Local(_) => Ok(()),
            Store::Remote(remote) => remote.bounds().await.map(|_| ()),
        }
    }

    /// Hands every record from the log start to the current end to `on_record`, in
    /// order: how internal logs are replayed on open. Blocking (reads the whole log).
    pub(crate) fn replay_records(
        &self,
        mut on_record: impl FnMut(Record) -> Result<(), CoreError>,
    ) -> Result<(), CoreError> {
        let end = self.log_end_offset();
        let mut offset = self.log_start_offset();
        while offset < end {
            let read = self.records_from(offset, REPLAY_BYTES)?;
            if read.next_offset <= offset {
                break;
            }
            offset = read.next_offset;
            for r in read.records {
                on_record(r)?;
            }
        }
        Ok(())
    }
}

/// Whether a transactional batch belongs to an aborted transaction: its producer has an
/// abort whose range (first offset up to the marker) holds the batch.
fn is_aborted(header: &BatchHeader, aborted: &[AbortedTxnEntry]) -> bool {
    aborted.iter().any(|a| {
        a.producer_id == header.producer_id
            && a.first_offset <= header.base_offset
            && header.base_offset < a.last_offset
    })
}

/// Bytes read per step of a replay.
const REPLAY_BYTES: u64 = 4 << 20;
