//! The one table from nagare errors to Kafka errors (the `kafka-protocol` crate's
//! [`ResponseError`], whose `code()` goes on the wire), and the crate's error type.

use nagare_core::groups::GroupError;
use nagare_core::log::{BatchError, LogError};
use nagare_core::producers::ProduceError;
use nagare_core::transactions::TxnError;
use nagare_core::CoreError;
use thiserror::Error;

pub use kafka_protocol::ResponseError;

/// Kafka's "no error" code: the crate's [`ResponseError`] lists failures only.
pub const NONE: i16 = 0;

/// The Kafka error for a broker-core error.
pub fn core_error(e: &CoreError) -> ResponseError {
    match e {
        CoreError::UnknownTopic(_) | CoreError::UnknownPartition { .. } => {
            ResponseError::UnknownTopicOrPartition
        }
        CoreError::TopicExists(_) => ResponseError::TopicAlreadyExists,
        CoreError::InvalidTopicName { .. } => ResponseError::InvalidTopicException,
        CoreError::InvalidPartitions(_) => ResponseError::InvalidPartitions,
        CoreError::InvalidConfig { .. } => ResponseError::InvalidConfig,
        CoreError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
        CoreError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        CoreError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        CoreError::Storage { .. } => ResponseError::KafkaStorageError,
        CoreError::ShuttingDown => ResponseError::NotLeaderOrFollower,
        CoreError::InvalidUser { .. } => ResponseError::UnacceptableCredential,
        CoreError::InvalidAcl(_) => ResponseError::InvalidRequest,
        CoreError::InvalidRecord(_) => ResponseError::InvalidRecord,
        // Retriable: the client tries again once the cluster answers.
        CoreError::Unavailable(_) => ResponseError::NotEnoughReplicas,
        CoreError::ClusterMode(_) => ResponseError::UnsupportedVersion,
        CoreError::Log(l) => log_error(l),
        CoreError::Io { .. }
        | CoreError::DataDirLocked { .. }
        | CoreError::DataDirNotADirectory(_) => ResponseError::KafkaStorageError,
    }
}

/// The Kafka error for a log error.
pub fn log_error(e: &LogError) -> ResponseError {
    match e {
        LogError::Batch(b) => batch_error(b),
        LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        // A closed log means the broker is stopping: clients retry elsewhere/later.
        LogError::Closed => ResponseError::NotLeaderOrFollower,
        LogError::Io { .. } => ResponseError::KafkaStorageError,
    }
}

/// The Kafka error for a refused record batch.
pub fn batch_error(e: &BatchError) -> ResponseError {
    match e {
        BatchError::TooLarge { .. } => ResponseError::MessageTooLarge,
        BatchError::UnsupportedMagic(_) => ResponseError::UnsupportedForMessageFormat,
        BatchError::InvalidRecordCount(_) => ResponseError::InvalidRecord,
        BatchError::Truncated { .. }
        | BatchError::InvalidLength(_)
        | BatchError::CrcMismatch { .. }
        | BatchError::Corrupt(_)
        | BatchError::UnsupportedCompression(_)
        | BatchError::Decompression(_) => ResponseError::CorruptMessage,
    }
}

/// The Kafka error for a group coordinator error.
pub fn group_error(e: &GroupError) -> ResponseError {
    match e {
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::MemberIdRequired(_) => ResponseError::MemberIdRequired,
        // Storage failures too: the client retries, as after a coordinator move.
        GroupError::CoordinatorNotAvailable | GroupError::Storage(_) => {
            ResponseError::CoordinatorNotAvailable
        }
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::InvalidSessionTimeout(_) => ResponseError::InvalidSessionTimeout,
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
        GroupError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        GroupError::OffsetMetadataTooLarge(_) => ResponseError::OffsetMetadataTooLarge,
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        GroupError::FencedMemberEpoch => ResponseError::FencedMemberEpoch,
        GroupError::StaleMemberEpoch => ResponseError::StaleMemberEpoch,
        GroupError::UnreleasedInstanceId => ResponseError::UnreleasedInstanceId,
        GroupError::UnsupportedAssignor(_) => ResponseError::UnsupportedAssignor,
        GroupError::InvalidRegularExpression(_) => ResponseError::InvalidRegularExpression,
        GroupError::InvalidRequest(_) => ResponseError::InvalidRequest,
    }
}

/// The Kafka error for a share-group error.
pub fn share_error(e: &nagare_core::share_groups::ShareError) -> ResponseError {
    use nagare_core::share_groups::ShareError;
    match e {
        ShareError::UnknownMemberId => ResponseError::UnknownMemberId,
        ShareError::FencedMemberEpoch => ResponseError::FencedMemberEpoch,
        ShareError::SessionNotFound => ResponseError::ShareSessionNotFound,
        ShareError::InvalidSessionEpoch => ResponseError::InvalidShareSessionEpoch,
        ShareError::InvalidRequest(_) => ResponseError::InvalidRequest,
        ShareError::InvalidConfig(_) => ResponseError::InvalidConfig,
        ShareError::NotShareGroup(_) => ResponseError::GroupIdNotFound,
        ShareError::GroupNotFound(_) => ResponseError::GroupIdNotFound,
        ShareError::GroupNotEmpty(_) => ResponseError::NonEmptyGroup,
        ShareError::Core(_) => ResponseError::CoordinatorNotAvailable,
    }
}

/// The Kafka error for a produce (idempotence) error.
pub fn produce_error(e: &ProduceError) -> ResponseError {
    match e {
        ProduceError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        ProduceError::UnknownProducerId(_) => ResponseError::UnknownProducerId,
        ProduceError::Core(c) => core_error(c),
    }
}

/// The Kafka error for a transaction coordinator error. `fenced_known`: the request
/// version knows PRODUCER_FENCED (added by KIP-588); older ones are told
/// INVALID_PRODUCER_EPOCH instead, as Kafka does. Likewise TRANSACTION_ABORTABLE
/// (KIP-890) becomes INVALID_TXN_STATE for versions that predate it (`abortable_known`).
pub fn txn_error(e: &TxnError, fenced_known: bool, abortable_known: bool) -> ResponseError {
    match e {
        TxnError::InvalidRequest(_) => ResponseError::InvalidRequest,
        TxnError::InvalidTransactionTimeout(_) => ResponseError::InvalidTransactionTimeout,
        TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
        TxnError::ProducerFenced if fenced_known => ResponseError::ProducerFenced,
        TxnError::ProducerFenced => ResponseError::InvalidProducerEpoch,
        TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
        TxnError::InvalidTxnState => ResponseError::InvalidTxnState,
        TxnError::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound,
        TxnError::TransactionAbortable if abortable_known => ResponseError::TransactionAbortable,
        TxnError::TransactionAbortable => ResponseError::InvalidTxnState,
        TxnError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        TxnError::Group(g) => group_error(g),
    }
}

/// Why a request could not be answered at all; the connection is closed after it.
#[derive(Debug, Error)]
pub enum KafkaError {
    #[error("malformed request: {0}")]
    Malformed(String),
    #[error("unsupported api key {0}")]
    UnknownApi(i16),
    #[error("unsupported version {version} of api key {key}")]
    UnsupportedVersion { key: i16, version: i16 },
    #[error("request of {size} bytes exceeds the limit of {limit}")]
    TooLarge { size: usize, limit: usize },
    #[error("could not encode response: {0}")]
    Encode(String),
    /// A request other than ApiVersions or the SASL exchange before authenticating on a
    /// listener that demands it: Kafka closes the connection too.
    #[error("api key {0} before authentication")]
    Unauthenticated(i16),
    /// An acks=0 produce that failed: nothing is answered, so, as Kafka does, the
    /// connection is closed for the producer to notice (and refresh its metadata).
    #[error("acks=0 produce to {topic}-{partition} failed with error code {code}")]
    AcksZeroFailed {
        topic: String,
        partition: i32,
        code: i16,
    },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_maps_the_client_visible_errors() {
        assert_eq!(
            core_error(&CoreError::UnknownTopic("t".into())),
            ResponseError::UnknownTopicOrPartition
        );
        assert_eq!(
            core_error(&CoreError::Log(LogError::OffsetOutOfRange {
                offset: 9,
                start: 0,
                end: 1
            })),
            ResponseError::OffsetOutOfRange
        );
        assert_eq!(
            core_error(&CoreError::OutOfOrderSequence {
                producer_id: 1,
                expected: 1,
                got: 3
            })
            .code(),
            45
        );
        assert_eq!(
            produce_error(&ProduceError::InvalidProducerEpoch {
                producer_id: 1,
                got: 1,
                current: 2
            })
            .code(),
            47
        );
    }
}
