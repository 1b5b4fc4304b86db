use thiserror::Error;

#[derive(Debug, Error)]
pub enum CoreError {
    #[error("unknown topic {0:?}")]
    UnknownTopic(String),
    #[error("unknown partition {partition} of topic {topic:?}")]
    UnknownPartition { topic: String, partition: i32 },
    #[error("topic {0:?} already exists")]
    TopicExists(String),
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName { name: String, reason: &'static str },
    #[error("invalid partition count {0}")]
    InvalidPartitions(i64),
    #[error("invalid topic config {key}: {reason}")]
    InvalidConfig { key: String, reason: String },
    #[error("record batch of {size} bytes exceeds max.message.bytes {limit}")]
    MessageTooLarge { size: usize, limit: usize },
    /// An idempotent producer's batch does not follow its previous one.
    #[error("out of order sequence {got} for producer {producer_id} (expected {expected})")]
    OutOfOrderSequence {
        producer_id: i64,
        expected: i32,
        got: i32,
    },
    /// A batch from an epoch older than its producer's current one (a zombie producer).
    #[error("producer {producer_id} epoch {got} is older than {current}")]
    InvalidProducerEpoch {
        producer_id: i64,
        got: i16,
        current: i16,
    },
    /// Reading or writing a partition's storage failed (disk full, I/O error). The
    /// partition stays at its last complete batch and keeps serving reads; appends work
    /// again once the cause is gone.
    #[error("storage error on {topic}-{partition}: {source}")]
    Storage {
        topic: String,
        partition: i32,
        #[source]
        source: nagare_log::LogError,
    },
    #[error("broker is shutting down")]
    ShuttingDown,
    #[error(
        "data directory {dir} is in use by another nagare process{}; only one process may open a data directory at a time",
        holder.map(|pid| format!(" (pid {pid})")).unwrap_or_default()
    )]
    DataDirLocked { dir: String, holder: Option<u32> },
    #[error("data directory {0} is not a directory (it is a file); give the path of a directory")]
    DataDirNotADirectory(String),
    /// A user name or credential the user store refuses.
    #[error("invalid user {name:?}: {reason}")]
    InvalidUser { name: String, reason: String },
    /// An ACL binding the authorizer refuses.
    #[error("invalid ACL: {0}")]
    InvalidAcl(String),
    /// A record the topic cannot take (a record without a key on a compacted topic).
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    /// Cluster mode: the cluster cannot be reached, or did not acknowledge in time.
    /// Nothing is known to be stored; the client may retry.
    #[error("the storage cluster is unavailable: {0}")]
    Unavailable(String),
    /// Cluster mode: what was asked needs the embedded log, which a gateway does not have.
    #[error("{0} is not available in cluster mode (the data lives in the Kafka cluster)")]
    ClusterMode(&'static str),
    #[error(transparent)]
    Log(#[from] nagare_log::LogError),
    #[error("io error on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl CoreError {
    pub(crate) fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        CoreError::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}

/// A copy of a log error, for answering several waiters with one failure (I/O errors are
/// not `Clone`: the copy keeps the kind and the message).
fn copy_log_error(e: &nagare_log::LogError) -> nagare_log::LogError {
    use nagare_log::LogError;
    match e {
        LogError::Batch(b) => LogError::Batch(b.clone()),
        LogError::OffsetOutOfRange { offset, start, end } => LogError::OffsetOutOfRange {
            offset: *offset,
            start: *start,
            end: *end,
        },
        LogError::Closed => LogError::Closed,
        LogError::Io { path, source } => LogError::Io {
            path: path.clone(),
            source: std::io::Error::new(source.kind(), source.to_string()),
        },
    }
}

impl CoreError {
    /// The same error again, for answering several callers with one failure.
    pub(crate) fn same(&self) -> CoreError {
        match self {
            CoreError::UnknownTopic(t) => CoreError::UnknownTopic(t.clone()),
            CoreError::UnknownPartition { topic, partition } => CoreError::UnknownPartition {
                topic: topic.clone(),
                partition: *partition,
            },
            CoreError::TopicExists(t) => CoreError::TopicExists(t.clone()),
            CoreError::InvalidTopicName { name, reason } => CoreError::InvalidTopicName {
                name: name.clone(),
                reason,
            },
            CoreError::InvalidPartitions(n) => CoreError::InvalidPartitions(*n),
            CoreError::InvalidConfig { key, reason } => CoreError::InvalidConfig {
                key: key.clone(),
                reason: reason.clone(),
            },
            CoreError::MessageTooLarge { size, limit } => CoreError::MessageTooLarge {
                size: *size,
                limit: *limit,
            },
            CoreError::OutOfOrderSequence {
                producer_id,
                expected,
                got,
            } => CoreError::OutOfOrderSequence {
                producer_id: *producer_id,
                expected: *expected,
                got: *got,
            },
            CoreError::InvalidProducerEpoch {
                producer_id,
                got,
                current,
            } => CoreError::InvalidProducerEpoch {
                producer_id: *producer_id,
                got: *got,
                current: *current,
            },
            CoreError::Storage {
                topic,
                partition,
                source,
            } => CoreError::Storage {
                topic: topic.clone(),
                partition: *partition,
                source: copy_log_error(source),
            },
            CoreError::ShuttingDown => CoreError::ShuttingDown,
            CoreError::DataDirLocked { dir, holder } => CoreError::DataDirLocked {
                dir: dir.clone(),
                holder: *holder,
            },
            CoreError::DataDirNotADirectory(d) => CoreError::DataDirNotADirectory(d.clone()),
            CoreError::InvalidUser { name, reason } => CoreError::InvalidUser {
                name: name.clone(),
                reason: reason.clone(),
            },
            CoreError::InvalidAcl(reason) => CoreError::InvalidAcl(reason.clone()),
            CoreError::InvalidRecord(reason) => CoreError::InvalidRecord(reason.clone()),
            CoreError::Unavailable(reason) => CoreError::Unavailable(reason.clone()),
            CoreError::ClusterMode(what) => CoreError::ClusterMode(what),
            CoreError::Log(e) => CoreError::Log(copy_log_error(e)),
            CoreError::Io { path, source } => CoreError::Io {
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
        }
    }
}
