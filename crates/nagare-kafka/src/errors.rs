//! The one table from nagare errors to Kafka error codes, and the crate's error type.

use nagare_core::groups::GroupError;
use nagare_core::log::{BatchError, LogError};
use nagare_core::producers::ProduceError;
use nagare_core::CoreError;
use thiserror::Error;

/// Kafka error codes used by the handlers (numbers from Kafka's `Errors` enum).
pub mod code {
    pub const NONE: i16 = 0;
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    pub const CORRUPT_MESSAGE: i16 = 2;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const INVALID_FETCH_SIZE: i16 = 4;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const MESSAGE_TOO_LARGE: i16 = 10;
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    pub const RECORD_LIST_TOO_LARGE: i16 = 18;
    pub const INVALID_REQUIRED_ACKS: i16 = 21;
    pub const INVALID_TIMESTAMP: i16 = 32;
    pub const UNSUPPORTED_FOR_MESSAGE_FORMAT: i16 = 43;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const INVALID_PARTITIONS: i16 = 37;
    pub const INVALID_REPLICATION_FACTOR: i16 = 38;
    pub const INVALID_REQUEST: i16 = 42;
    pub const INVALID_CONFIG: i16 = 40;
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
    pub const UNKNOWN_PRODUCER_ID: i16 = 59;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
    pub const INCONSISTENT_TOPIC_ID: i16 = 103;
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
    pub const INVALID_RECORD: i16 = 87;
    pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const ILLEGAL_GENERATION: i16 = 22;
    pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    pub const INVALID_GROUP_ID: i16 = 24;
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    pub const INVALID_SESSION_TIMEOUT: i16 = 26;
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    pub const NON_EMPTY_GROUP: i16 = 68;
    pub const GROUP_ID_NOT_FOUND: i16 = 69;
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    pub const FENCED_INSTANCE_ID: i16 = 82;
    pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
}

/// The Kafka error code for a broker-core error.
pub fn core_error_code(e: &CoreError) -> i16 {
    match e {
        CoreError::UnknownTopic(_) | CoreError::UnknownPartition { .. } => {
            code::UNKNOWN_TOPIC_OR_PARTITION
        }
        CoreError::TopicExists(_) => code::TOPIC_ALREADY_EXISTS,
        CoreError::InvalidTopicName { .. } => code::INVALID_TOPIC_EXCEPTION,
        CoreError::InvalidPartitions(_) => code::INVALID_PARTITIONS,
        CoreError::InvalidConfig { .. } => code::INVALID_CONFIG,
        CoreError::MessageTooLarge { .. } => code::MESSAGE_TOO_LARGE,
        CoreError::OutOfOrderSequence { .. } => code::OUT_OF_ORDER_SEQUENCE_NUMBER,
        CoreError::InvalidProducerEpoch { .. } => code::INVALID_PRODUCER_EPOCH,
        CoreError::Storage { .. } => code::KAFKA_STORAGE_ERROR,
        CoreError::ShuttingDown => code::NOT_LEADER_OR_FOLLOWER,
        CoreError::Log(l) => log_error_code(l),
        CoreError::Io { .. } => code::KAFKA_STORAGE_ERROR,
    }
}

/// The Kafka error code for a log error.
pub fn log_error_code(e: &LogError) -> i16 {
    match e {
        LogError::Batch(b) => batch_error_code(b),
        LogError::OffsetOutOfRange { .. } => code::OFFSET_OUT_OF_RANGE,
        // A closed log means the broker is stopping: clients retry elsewhere/later.
        LogError::Closed => code::NOT_LEADER_OR_FOLLOWER,
        LogError::Io { .. } => code::KAFKA_STORAGE_ERROR,
    }
}

/// The Kafka error code for a refused record batch.
pub fn batch_error_code(e: &BatchError) -> i16 {
    match e {
        BatchError::TooLarge { .. } => code::MESSAGE_TOO_LARGE,
        BatchError::UnsupportedMagic(_) => code::UNSUPPORTED_FOR_MESSAGE_FORMAT,
        BatchError::InvalidRecordCount(_) => code::INVALID_RECORD,
        BatchError::Truncated { .. }
        | BatchError::InvalidLength(_)
        | BatchError::CrcMismatch { .. }
        | BatchError::Corrupt(_)
        | BatchError::UnsupportedCompression(_)
        | BatchError::Decompression(_) => code::CORRUPT_MESSAGE,
    }
}

/// The Kafka error code for a group coordinator error.
pub fn group_error_code(e: &GroupError) -> i16 {
    match e {
        GroupError::UnknownMemberId => code::UNKNOWN_MEMBER_ID,
        GroupError::IllegalGeneration => code::ILLEGAL_GENERATION,
        GroupError::RebalanceInProgress => code::REBALANCE_IN_PROGRESS,
        GroupError::MemberIdRequired(_) => code::MEMBER_ID_REQUIRED,
        // Storage failures too: the client retries, as after a coordinator move.
        GroupError::CoordinatorNotAvailable | GroupError::Storage(_) => {
            code::COORDINATOR_NOT_AVAILABLE
        }
        GroupError::GroupIdNotFound => code::GROUP_ID_NOT_FOUND,
        GroupError::NonEmptyGroup => code::NON_EMPTY_GROUP,
        GroupError::FencedInstanceId => code::FENCED_INSTANCE_ID,
        GroupError::InconsistentGroupProtocol => code::INCONSISTENT_GROUP_PROTOCOL,
        GroupError::InvalidSessionTimeout(_) => code::INVALID_SESSION_TIMEOUT,
        GroupError::InvalidGroupId => code::INVALID_GROUP_ID,
        GroupError::UnknownTopicOrPartition => code::UNKNOWN_TOPIC_OR_PARTITION,
        GroupError::OffsetMetadataTooLarge(_) => code::OFFSET_METADATA_TOO_LARGE,
        GroupError::GroupSubscribedToTopic => code::GROUP_SUBSCRIBED_TO_TOPIC,
    }
}

/// The Kafka error code for a produce (idempotence) error.
pub fn produce_error_code(e: &ProduceError) -> i16 {
    match e {
        ProduceError::InvalidProducerEpoch { .. } => code::INVALID_PRODUCER_EPOCH,
        ProduceError::UnknownProducerId(_) => code::UNKNOWN_PRODUCER_ID,
        ProduceError::Core(c) => core_error_code(c),
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
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_maps_the_client_visible_errors() {
        assert_eq!(
            core_error_code(&CoreError::UnknownTopic("t".into())),
            code::UNKNOWN_TOPIC_OR_PARTITION
        );
        assert_eq!(
            core_error_code(&CoreError::Log(LogError::OffsetOutOfRange {
                offset: 9,
                start: 0,
                end: 1
            })),
            code::OFFSET_OUT_OF_RANGE
        );
        assert_eq!(
            core_error_code(&CoreError::OutOfOrderSequence {
                producer_id: 1,
                expected: 1,
                got: 3
            }),
            45
        );
        assert_eq!(
            produce_error_code(&ProduceError::InvalidProducerEpoch {
                producer_id: 1,
                got: 1,
                current: 2
            }),
            47
        );
    }
}
