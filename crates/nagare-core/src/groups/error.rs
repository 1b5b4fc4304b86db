use thiserror::Error;

/// Why the group coordinator refused a request. The Kafka front end maps each variant to
/// its wire error code; nothing here knows about the wire.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GroupError {
    #[error("unknown member id")]
    UnknownMemberId,
    #[error("illegal generation")]
    IllegalGeneration,
    #[error("rebalance in progress")]
    RebalanceInProgress,
    /// First JoinGroup round of a new dynamic member (Kafka v4+): the member must join
    /// again with the id it was given.
    #[error("member id required; join again as {0}")]
    MemberIdRequired(String),
    #[error("coordinator not available")]
    CoordinatorNotAvailable,
    #[error("group id not found")]
    GroupIdNotFound,
    #[error("group is not empty")]
    NonEmptyGroup,
    #[error("static member fenced by a newer instance with the same group.instance.id")]
    FencedInstanceId,
    #[error("inconsistent group protocol")]
    InconsistentGroupProtocol,
    #[error("session timeout {0} ms outside the allowed range")]
    InvalidSessionTimeout(i64),
    #[error("invalid group id")]
    InvalidGroupId,
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("offset metadata of {0} bytes is too large")]
    OffsetMetadataTooLarge(usize),
    #[error("the group is subscribed to the topic")]
    GroupSubscribedToTopic,
    #[error("fenced member epoch")]
    FencedMemberEpoch,
    #[error("stale member epoch")]
    StaleMemberEpoch,
    #[error("instance id still used by another member")]
    UnreleasedInstanceId,
    #[error("unsupported assignor {0:?}")]
    UnsupportedAssignor(String),
    #[error("invalid regular expression: {0}")]
    InvalidRegularExpression(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("group state could not be stored: {0}")]
    Storage(String),
}
