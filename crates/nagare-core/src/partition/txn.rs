//! Transactions in a partition: the markers the transaction coordinator writes to end a
//! producer's transaction here, the last stable offset read-committed readers stop at,
//! the aborted transactions they must skip, and the producers' state for
//! DescribeProducers.
//!
//! The log tracks open transactions and keeps the `.txnindex` (see
//! `nagare_log::control` and the log's `txn` module); this file is the core's view of it.
//! Markers go through the one append path, so they are ordered with the data, fence
//! producers with an older epoch and wake readers like any other batch.

use std::time::Duration;

use nagare_log::control::build_control_batch;

use super::{AckLevel, Partition};
use crate::CoreError;

/// An aborted transaction a read-committed reader of a range must skip: the records of
/// `producer_id` from `first_offset` up to its ABORT marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
}

/// What this partition knows of one producer (for DescribeProducers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerStateInfo {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Sequence of the producer's last record here, -1 if none is remembered.
    pub last_sequence: i32,
    /// Timestamp of its last batch or marker here, -1 if unknown.
    pub last_timestamp: i64,
    /// Coordinator epoch of its last marker here, -1 if none.
    pub coordinator_epoch: i32,
    /// First offset of its open transaction here, -1 if none.
    pub current_txn_start_offset: i64,
}

impl Partition {
    /// Appends a COMMIT/ABORT marker ending `producer_id`'s transaction here; on abort
    /// the log adds the `.txnindex` entry; moves the LSO; durable (fsynced) before
    /// returning, whatever the topic's flush policy. An epoch below the producer's
    /// current one is refused (`InvalidProducerEpoch`). A marker for a producer with no
    /// open transaction here is still written, as Kafka does. Returns its offset.
    pub async fn write_txn_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> Result<i64, CoreError> {
        if self.is_remote() {
            return Err(CoreError::ClusterMode("transaction markers"));
        }
        let batch = build_control_batch(
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            nagare_log::now_ms(),
        );
        let info = self.append(batch, AckLevel::Durable).await?;
        self.sync_to(info.last_offset + 1).await?;
        Ok(info.base_offset)
    }

    /// The last stable offset: the first offset of the oldest open transaction, else the
    /// high watermark. Read-committed readers see only what is below it.
    pub fn last_stable_offset(&self) -> i64 {
        match self.log() {
            Some(log) => log.last_stable_offset(),
            // Read committed by the cluster's reader: its end is the committed end.
            None => self.log_end_offset(),
        }
    }

    /// Whole batches from `offset` below the last stable offset, as file slices (what a
    /// read-committed consumer may be sent); see [`Partition::read`].
    pub fn read_committed(
        &self,
        offset: i64,
        max_bytes: u64,
    ) -> Result<nagare_log::ReadResult, CoreError> {
        match self.log() {
            Some(log) => Ok(log.read_committed(offset, max_bytes)?),
            None => Err(CoreError::ClusterMode("reading record batches as files")),
        }
    }

    /// The aborted transactions overlapping [from, upto): those whose ABORT marker is at
    /// or after `from` and whose first offset is before `upto`.
    pub fn aborted_transactions(&self, from: i64, upto: i64) -> Vec<AbortedTxn> {
        let Some(log) = self.log() else {
            return Vec::new();
        };
        log.aborted_transactions(from, upto)
            .into_iter()
            .map(|e| AbortedTxn {
                producer_id: e.producer_id,
                first_offset: e.first_offset,
            })
            .collect()
    }

    /// Whether `producer_id` has an open transaction here: its later batches need no
    /// KIP-890 check with the coordinator, only the first of each transaction does.
    pub fn in_transaction(&self, producer_id: i64) -> bool {
        self.log()
            .is_some_and(|log| log.has_ongoing_transaction(producer_id))
    }

    /// Every producer this partition knows of (from its batches and markers in the log
    /// since the broker started, or the log's tail read at the first idempotent write),
    /// plus any producer with an open transaction here.
    pub fn producer_states(&self) -> Vec<ProducerStateInfo> {
        let ongoing = self
            .log()
            .map(|log| log.ongoing_transactions())
            .unwrap_or_default();
        let mut out: Vec<ProducerStateInfo> = {
            let producers = self.producers.producers.lock();
            producers
                .iter()
                .filter(|(_, e)| e.known)
                .map(|(&producer_id, e)| ProducerStateInfo {
                    producer_id,
                    producer_epoch: e.epoch,
                    last_sequence: e.batches.back().map_or(-1, |b| b.last_seq),
                    last_timestamp: if e.last_timestamp > 0 {
                        e.last_timestamp
                    } else {
                        -1
                    },
                    coordinator_epoch: e.coordinator_epoch.unwrap_or(-1),
                    current_txn_start_offset: -1,
                })
                .collect()
        };
        for (producer_id, first) in ongoing {
            match out.iter_mut().find(|p| p.producer_id == producer_id) {
                Some(p) => p.current_txn_start_offset = first,
                None => out.push(ProducerStateInfo {
                    producer_id,
                    producer_epoch: -1,
                    last_sequence: -1,
                    last_timestamp: -1,
                    coordinator_epoch: -1,
                    current_txn_start_offset: first,
                }),
            }
        }
        out.sort_unstable_by_key(|p| p.producer_id);
        out
    }

    /// Loads the producers' state from the log's tail if it is not yet (so
    /// [`Partition::producer_states`] reports what the log holds after a restart).
    pub async fn load_producer_states(&self) -> Result<(), CoreError> {
        match self.log() {
            Some(log) => self.producers.ensure_loaded(log).await,
            None => Ok(()),
        }
    }

    /// A receiver that changes whenever the last stable offset moves.
    pub fn subscribe_stable(&self) -> tokio::sync::watch::Receiver<i64> {
        if self.is_remote() {
            return self.subscribe();
        }
        self.stable_offset.subscribe()
    }

    /// Waits until the last stable offset is beyond `offset` or `timeout` passes;
    /// returns whether committed data is there.
    pub async fn wait_stable_beyond(&self, offset: i64, timeout: Duration) -> bool {
        let mut rx = self.subscribe_stable();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|lso| *lso > offset)).await;
        matches!(waited, Ok(Ok(_)))
    }
}

#[cfg(test)]
#[path = "txn_tests.rs"]
mod tests;
