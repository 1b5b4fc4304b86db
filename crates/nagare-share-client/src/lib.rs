//! A Kafka share-group consumer (KIP-932: ShareGroupHeartbeat, ShareFetch,
//! ShareAcknowledge) for nagare's cluster mode, where STOMP `/queue/Q` is the share group
//! `Q` on topic `queue.Q` of an external Kafka cluster.
//!
//! Why by hand: the cluster side of nagare uses librdkafka (the `rdkafka` crate) for
//! everything else, but the librdkafka it vendors (2.12) has no share consumer, and the
//! rest of the client would only be a thin layer over the `kafka-protocol` codec nagare
//! already uses for its own Kafka front end. This crate is that thin layer, no more:
//! discovery, the share-group heartbeat, share sessions, fetch and acknowledge.

use std::time::Duration;

pub use nagare_log::batch::Record;

/// How to reach the cluster: Kafka client property names, as in `[store.kafka]`.
#[derive(Debug, Clone, Default)]
pub struct ShareClientConfig {
    /// `host:port` of one or more brokers.
    pub bootstrap: Vec<String>,
    /// Sent as the request header's client id.
    pub client_id: String,
    /// Kafka client properties (`security.protocol`, `sasl.mechanism`,
    /// `sasl.username`, `sasl.password`, `ssl.ca.location`, ...).
    pub properties: Vec<(String, String)>,
    /// Bound of every request round trip.
    pub request_timeout: Duration,
}

/// One acquired record: locked for this member until it is acknowledged or its
/// acquisition lock runs out.
#[derive(Debug, Clone)]
pub struct ShareRecord {
    pub topic: std::sync::Arc<str>,
    pub partition: i32,
    pub offset: i64,
    /// 1 on the first delivery.
    pub delivery_count: i16,
    pub record: Record,
}

/// What a member says about a record it acquired (Kafka's AcknowledgeType).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckKind {
    Accept,
    Release,
    Reject,
}

#[derive(Debug, thiserror::Error)]
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
}

/// A member of one share group, subscribed to some topics.
pub struct ShareConsumer {
    _private: (),
}

impl ShareConsumer {
    /// Joins `group` subscribed to `topics` (ShareGroupHeartbeat with member epoch 0).
    pub async fn join(
        config: ShareClientConfig,
        group: &str,
        topics: Vec<String>,
    ) -> Result<ShareConsumer, ShareError> {
        let _ = (config, group, topics);
        Err(ShareError::Unsupported("not built yet".into()))
    }

    /// Waits up to `wait` for records and returns at most about `max_records` of them,
    /// acquired for this member. Acknowledgements noted since the last call ride along.
    pub async fn poll(
        &self,
        max_records: usize,
        wait: Duration,
    ) -> Result<Vec<ShareRecord>, ShareError> {
        let _ = (max_records, wait);
        Err(ShareError::Closed)
    }

    /// Notes how an acquired record is settled; sent with the next poll or flush.
    pub fn acknowledge(&self, topic: &str, partition: i32, offset: i64, kind: AckKind) {
        let _ = (topic, partition, offset, kind);
    }

    /// Sends the noted acknowledgements now (ShareAcknowledge) and waits for the answer.
    pub async fn flush(&self) -> Result<(), ShareError> {
        Err(ShareError::Closed)
    }

    /// Sends the noted acknowledgements, closes the share sessions and leaves the group
    /// (member epoch -1): what it still held goes back to the group at once.
    pub async fn close(self) -> Result<(), ShareError> {
        Ok(())
    }
}

/// Whether the cluster offers share groups (ShareGroupHeartbeat in ApiVersions).
pub async fn share_groups_supported(config: &ShareClientConfig) -> Result<bool, ShareError> {
    let _ = config;
    Err(ShareError::Unsupported("not built yet".into()))
}
