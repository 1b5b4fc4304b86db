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
    #[error("broker is shutting down")]
    ShuttingDown,
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
