//! The transaction coordinator (Kafka's `TransactionCoordinator`): transactional ids, their
//! producer ids and epochs, the partitions and consumer-group offsets of each open
//! transaction, and the two-phase end of a transaction (a decision stored first, then a
//! COMMIT/ABORT marker in every partition of the transaction, then the completion).
//!
//! Built like the group coordinator:
//!
//! - [`Transactions`] (`machine.rs`) is a pure state machine: every transition takes the
//!   wall-clock time in milliseconds and returns the next [`TxnMetadata`] of one
//!   transactional id to store, or a [`TxnError`]. It follows Kafka's transaction
//!   version 1 rules (the versions clients use unless the cluster finalizes the
//!   `transaction.version` feature, which this broker does not).
//! - [`TransactionCoordinator`] (`coordinator.rs`) is the driver: one lock, the internal
//!   log `transactions` (one record per transition, keyed by transactional id, the value
//!   being the whole metadata, so the last record per key is the state), the markers
//!   (`markers.rs`), the offsets handed to the group coordinator on commit, and a timer
//!   that aborts transactions older than their `transaction.timeout.ms` and forgets ids
//!   idle for `transactional.id.expiration.ms`.
//!
//! **Recovery.** On open the log is replayed. A transaction found in PrepareCommit or
//! PrepareAbort was decided: the background task writes its markers again (a marker is
//! idempotent) and completes it. An Ongoing one is aborted (and its producer fenced) right
//! after the start when the previous process crashed: Produce acknowledges transactional
//! records without an fsync and the commit fsyncs them before its decision, so records of
//! a transaction still open at a crash may be gone. After a clean shutdown everything was
//! fsynced and an open transaction goes on, left to time out as in Kafka (its deadline is
//! its start time, wall clock and stored, plus its timeout).

mod coordinator;
mod error;
mod machine;
mod markers;
mod persist;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

pub use coordinator::{TransactionCoordinator, TransactionsBackground};
pub use error::TxnError;
pub use machine::{InitStep, Transactions, Transition, TxnListing};
pub use persist::{StoredTransactions, TxnOp, TRANSACTIONS_LOG};

/// Settings of the transaction coordinator (Kafka's broker settings of the same names).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct TransactionConfig {
    /// `transaction.max.timeout.ms`: the longest `transaction.timeout.ms` a producer may
    /// ask for (INVALID_TRANSACTION_TIMEOUT beyond it).
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: a transactional id with no transaction in
    /// progress and no request for this long is forgotten.
    pub id_expiration_ms: i64,
    /// `transaction.partition.verification.enable` (KIP-890 part 1): the first
    /// transactional batch of a transaction on a partition is checked against the
    /// coordinator (the partition must have been added), else INVALID_TXN_STATE.
    pub partition_verification: bool,
}

impl Default for TransactionConfig {
    fn default() -> Self {
        TransactionConfig {
            max_timeout_ms: 900_000,
            id_expiration_ms: 7 * 24 * 3600 * 1000,
            partition_verification: true,
        }
    }
}

/// Kafka's transaction states, with the names DescribeTransactions and ListTransactions
/// use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Decided but not yet completed: its markers are (being) written.
    pub fn is_prepared(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// An offset a transaction commits to a consumer group when (and only when) it commits
/// (TxnOffsetCommit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingOffset {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// Everything stored about one transactional id (Kafka's `TransactionMetadata`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnMetadata {
    pub producer_id: i64,
    /// The producer id before the last rotation (epoch exhaustion), or -1.
    pub last_producer_id: i64,
    /// -1 only for an id created but never stored.
    pub producer_epoch: i16,
    /// The epoch before the last InitProducerId bump (a retry of that call may get the
    /// same answer), or -1 when the last bump fenced someone.
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// Partitions written by the open (or deciding) transaction.
    pub partitions: BTreeSet<(String, i32)>,
    /// Groups added with AddOffsetsToTxn.
    pub groups: BTreeSet<String>,
    /// Offsets given with TxnOffsetCommit, committed to their groups on commit.
    pub offsets: Vec<PendingOffset>,
    /// When the transaction started (its first AddPartitions/AddOffsets), -1 when none.
    pub start_ms: i64,
    pub last_update_ms: i64,
}

impl TxnMetadata {
    /// When the open transaction times out, if it is open.
    pub fn deadline_ms(&self) -> Option<i64> {
        (self.state == TxnState::Ongoing && self.start_ms >= 0)
            .then(|| self.start_ms.saturating_add(i64::from(self.timeout_ms)))
    }
}

/// Kafka's rule: epochs up to `i16::MAX - 1`, so the coordinator can always fence once
/// more.
pub(crate) fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}
