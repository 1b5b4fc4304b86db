use thiserror::Error;

use crate::groups::GroupError;

/// Why the transaction coordinator refused a request. The Kafka front end maps each
/// variant to its wire error code (and to the older code where a request version
/// predates it).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TxnError {
    #[error("invalid request: {0}")]
    InvalidRequest(&'static str),
    #[error("transaction timeout {0} ms is not in 1..=transaction.max.timeout.ms")]
    InvalidTransactionTimeout(i32),
    /// Another transition of this id is in progress (or its markers are being written):
    /// the client retries.
    #[error("a concurrent transaction transition is in progress")]
    ConcurrentTransactions,
    /// The epoch is not the current one: another producer took the id over.
    #[error("producer fenced by a newer epoch")]
    ProducerFenced,
    #[error("the producer id does not belong to this transactional id")]
    InvalidProducerIdMapping,
    #[error("invalid transaction state for this request")]
    InvalidTxnState,
    #[error("unknown transactional id")]
    TransactionalIdNotFound,
    /// The partition is not in the transaction (KIP-890 verification).
    #[error("the partition is not part of the transaction")]
    TransactionAbortable,
    /// The coordinator is stopping or could not store the change: the client retries.
    #[error("transaction coordinator not available")]
    CoordinatorNotAvailable,
    #[error(transparent)]
    Group(#[from] GroupError),
}
