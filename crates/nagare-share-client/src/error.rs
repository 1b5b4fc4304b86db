//! The crate's one error type, and the Kafka error codes the client acts on.

use kafka_protocol::error::ResponseError as E;
use kafka_protocol::protocol::StrBytes;

use crate::error_names::error_name;

#[derive(Debug, Clone, thiserror::Error)]
pub enum ShareError {
    #[error("the cluster does not offer share groups (KIP-932): {0}")]
    Unsupported(String),
    #[error("cannot reach the cluster: {0}")]
    Unreachable(String),
    #[error("kafka error {code} ({name}): {message}")]
    Kafka {
        code: i16,
        name: &'static str,
        message: String,
    },
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("the consumer is closed")]
    Closed,
    /// A client property has a value this client does not support (or a file it names
    /// cannot be read).
    #[error("configuration: {0}")]
    Config(String),
}

impl ShareError {
    /// The error a broker answered with `code` (not 0), with its message if it sent one.
    pub(crate) fn kafka(code: i16, message: Option<&StrBytes>) -> ShareError {
        ShareError::Kafka {
            code,
            name: error_name(code),
            message: message.map(|m| m.to_string()).unwrap_or_default(),
        }
    }

    /// Whether trying again later may succeed: the cluster was unreachable, or Kafka says
    /// the error is retriable (a leader or coordinator moving, a session to reopen).
    pub fn is_retriable(&self) -> bool {
        match self {
            ShareError::Unreachable(_) => true,
            ShareError::Kafka { code, .. } => {
                E::try_from_code(*code).is_some_and(|e| e.is_retriable())
            }
            _ => false,
        }
    }

    /// The Kafka error code, for a `Kafka` error.
    pub fn kafka_code(&self) -> Option<i16> {
        match self {
            ShareError::Kafka { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// The codes the client reacts to, by Kafka's names.
pub(crate) mod code {
    use super::E;

    pub(crate) const NONE: i16 = 0;
    pub(crate) const UNKNOWN_TOPIC_OR_PARTITION: i16 = E::UnknownTopicOrPartition.code();
    pub(crate) const LEADER_NOT_AVAILABLE: i16 = E::LeaderNotAvailable.code();
    pub(crate) const NOT_LEADER_OR_FOLLOWER: i16 = E::NotLeaderOrFollower.code();
    pub(crate) const COORDINATOR_LOAD_IN_PROGRESS: i16 = E::CoordinatorLoadInProgress.code();
    pub(crate) const COORDINATOR_NOT_AVAILABLE: i16 = E::CoordinatorNotAvailable.code();
    pub(crate) const NOT_COORDINATOR: i16 = E::NotCoordinator.code();
    pub(crate) const UNKNOWN_MEMBER_ID: i16 = E::UnknownMemberId.code();
    pub(crate) const KAFKA_STORAGE_ERROR: i16 = E::KafkaStorageError.code();
    pub(crate) const FENCED_LEADER_EPOCH: i16 = E::FencedLeaderEpoch.code();
    pub(crate) const UNKNOWN_TOPIC_ID: i16 = E::UnknownTopicId.code();
    pub(crate) const FENCED_MEMBER_EPOCH: i16 = E::FencedMemberEpoch.code();
    pub(crate) const SHARE_SESSION_NOT_FOUND: i16 = E::ShareSessionNotFound.code();
    pub(crate) const INVALID_SHARE_SESSION_EPOCH: i16 = E::InvalidShareSessionEpoch.code();
    pub(crate) const SHARE_SESSION_LIMIT_REACHED: i16 = E::ShareSessionLimitReached.code();

    /// Partition errors that mean "ask the cluster again who leads it".
    pub(crate) fn needs_metadata(code: i16) -> bool {
        matches!(
            code,
            UNKNOWN_TOPIC_OR_PARTITION
                | LEADER_NOT_AVAILABLE
                | NOT_LEADER_OR_FOLLOWER
                | KAFKA_STORAGE_ERROR
                | FENCED_LEADER_EPOCH
                | UNKNOWN_TOPIC_ID
        )
    }

    /// Top-level share-fetch errors that only mean "open a new share session".
    pub(crate) fn session_lost(code: i16) -> bool {
        matches!(
            code,
            SHARE_SESSION_NOT_FOUND | INVALID_SHARE_SESSION_EPOCH | SHARE_SESSION_LIMIT_REACHED
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_errors_carry_kafka_names() {
        let e = ShareError::kafka(code::NOT_COORDINATOR, None);
        assert_eq!(e.to_string(), "kafka error 16 (NOT_COORDINATOR): ");
        assert!(e.is_retriable());
        let e = ShareError::kafka(30, Some(&StrBytes::from_static_str("no")));
        assert_eq!(
            e.to_string(),
            "kafka error 30 (GROUP_AUTHORIZATION_FAILED): no"
        );
        assert!(!e.is_retriable());
        assert_eq!(e.kafka_code(), Some(30));
        assert!(ShareError::Unreachable("x".into()).is_retriable());
        assert!(!ShareError::Closed.is_retriable());
    }

    #[test]
    fn codes_match_kafka() {
        assert_eq!(code::FENCED_MEMBER_EPOCH, 110);
        assert_eq!(code::SHARE_SESSION_NOT_FOUND, 122);
        assert_eq!(code::INVALID_SHARE_SESSION_EPOCH, 123);
        assert!(code::needs_metadata(6));
        assert!(!code::needs_metadata(0));
        assert!(code::session_lost(133));
    }
}
