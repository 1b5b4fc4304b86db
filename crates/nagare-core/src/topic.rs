use std::sync::Arc;

use parking_lot::RwLock;
use uuid::Uuid;

use crate::{CoreError, Partition, TimestampType, TopicConfig};

/// The topic settings a producer's record timestamps are checked against
/// (`message.timestamp.*`), read without cloning the whole config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampPolicy {
    /// `message.timestamp.type=LogAppendTime`: the broker stamps batches, nothing checked.
    pub log_append_time: bool,
    /// `message.timestamp.before.max.ms`: how far in the past a CreateTime timestamp may be.
    pub before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far in the future.
    pub after_max_ms: i64,
}

/// A named topic with its id, settings and partitions.
pub struct Topic {
    name: Arc<str>,
    id: Uuid,
    pub(crate) config: RwLock<TopicConfig>,
    pub(crate) partitions: RwLock<Vec<Arc<Partition>>>,
}

impl Topic {
    pub(crate) fn new(
        name: &str,
        id: Uuid,
        config: TopicConfig,
        partitions: Vec<Arc<Partition>>,
    ) -> Topic {
        Topic {
            name: name.into(),
            id,
            config: RwLock::new(config),
            partitions: RwLock::new(partitions),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn name_arc(&self) -> Arc<str> {
        self.name.clone()
    }

    /// The topic's UUID, stable across restarts (Kafka topic id).
    pub fn id(&self) -> Uuid {
        self.id
    }

    pub fn config(&self) -> TopicConfig {
        self.config.read().clone()
    }

    pub fn timestamp_policy(&self) -> TimestampPolicy {
        let c = self.config.read();
        TimestampPolicy {
            log_append_time: c.message_timestamp_type == TimestampType::LogAppendTime,
            before_max_ms: c.message_timestamp_before_max_ms,
            after_max_ms: c.message_timestamp_after_max_ms,
        }
    }

    pub fn partition_count(&self) -> usize {
        self.partitions.read().len()
    }

    pub fn partitions(&self) -> Vec<Arc<Partition>> {
        self.partitions.read().clone()
    }

    pub fn partition(&self, index: i32) -> Result<Arc<Partition>, CoreError> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.read().get(i).cloned())
            .ok_or_else(|| CoreError::UnknownPartition {
                topic: self.name.to_string(),
                partition: index,
            })
    }
}
