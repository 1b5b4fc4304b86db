//! The crate's error, and what each becomes for the core (whose errors the front ends
//! turn into their protocol's).

use nagare_core::CoreError;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ClusterError {
    /// A `--store` value that is neither `local` nor `kafka://HOST:PORT[,...]`.
    #[error("invalid store {value:?}: {reason} (expected `local` or `kafka://HOST:PORT[,HOST:PORT...]`)")]
    StoreUrl { value: String, reason: String },
    /// A `[store.kafka]` property librdkafka or nagare refuses.
    #[error("invalid [store.kafka] property {name:?}: {reason}")]
    Property { name: String, reason: String },
    /// The cluster cannot be used for cluster mode.
    #[error("{0}")]
    Unsuitable(String),
    #[error("kafka client: {0}")]
    Kafka(#[from] KafkaError),
    #[error("the cluster is unavailable: {0}")]
    Unavailable(String),
    #[error("starting a thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// The core's error for a failed cluster request about `topic`.
pub(crate) fn core_error(topic: &str, e: &KafkaError) -> CoreError {
    // An admin operation's own error carries its code outside `rdkafka_error_code`.
    let code = match e {
        KafkaError::AdminOp(code) => Some(*code),
        other => other.rdkafka_error_code(),
    };
    match code {
        Some(RDKafkaErrorCode::TopicAlreadyExists) => CoreError::TopicExists(topic.to_string()),
        Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) => {
            CoreError::UnknownTopic(topic.to_string())
        }
        Some(RDKafkaErrorCode::InvalidTopic) => CoreError::InvalidTopicName {
            name: topic.to_string(),
            reason: "refused by the cluster",
        },
        Some(RDKafkaErrorCode::InvalidPartitions) => CoreError::InvalidPartitions(-1),
        Some(RDKafkaErrorCode::InvalidConfig | RDKafkaErrorCode::PolicyViolation) => {
            CoreError::InvalidConfig {
                key: topic.to_string(),
                reason: e.to_string(),
            }
        }
        Some(
            RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::InvalidMessage,
        ) => CoreError::InvalidRecord(format!("refused by the cluster: {e}")),
        _ => CoreError::Unavailable(e.to_string()),
    }
}
