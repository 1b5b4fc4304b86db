use thiserror::Error;

/// Why a share-group request was refused. The Kafka front end maps each variant to its
/// wire error code; nothing here knows about the wire.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ShareError {
    #[error("unknown member id")]
    UnknownMemberId,
    #[error("fenced member epoch")]
    FencedMemberEpoch,
    #[error("share session not found")]
    SessionNotFound,
    #[error("invalid share session epoch")]
    InvalidSessionEpoch,
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    #[error("group {0} is not a share group")]
    NotShareGroup(String),
    #[error("group {0} does not exist")]
    GroupNotFound(String),
    #[error("group {0} has members")]
    GroupNotEmpty(String),
    #[error("{0}")]
    Core(String),
}
