//! Kafka wire protocol front end of nagare.
//!
//! The listener layer accepts connections; each connection (`connection.rs`) reads requests into a
//! buffer, answers them in order through the handler registry (`handlers/`, one file per
//! API key) and writes the answers back with one vectored write, using `sendfile(2)` for
//! the record data of fetch responses.

mod acl_wire;
pub mod client;
mod codec;
mod connection;
pub mod consumer_protocol;
pub mod errors;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
mod handlers;
mod inflight;
mod internal_topics;
mod memory_pool;
mod meters;
mod output;
mod rejected;
mod sasl;
mod session;
mod state;
mod timestamps;

use std::sync::Arc;

use nagare_listener::Connection;
use serde::{Deserialize, Serialize};

pub use errors::KafkaError;
pub use output::{Chunk, Reply};
pub use state::KafkaState;

/// Settings of the kafka listener (the `[kafka]` table of nagare.toml).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// host:port given to clients in Metadata responses (default: the listen address).
    pub advertise: Option<String>,
    /// Largest request accepted (Kafka's `socket.request.max.bytes`); a bigger one closes
    /// the connection before anything is allocated for it.
    pub max_request_bytes: u32,
    /// Most bytes of requests read but not yet answered, over all connections (Kafka's
    /// `queued.max.request.bytes`). Past it, connections stop reading until requests are
    /// answered; a single request larger than this closes its connection.
    pub queued_max_request_bytes: u64,
    /// Most bytes of responses buffered before they are written out.
    pub max_pending_response_bytes: u32,
    /// Longest a fetch may wait for data, whatever the client asks (milliseconds).
    pub max_fetch_wait_ms: u32,
    /// Largest fetch response (all partitions), whatever the client asks.
    pub max_fetch_bytes: u32,
    /// How long a new group waits for more members before its first assignment
    /// (Kafka's `group.initial.rebalance.delay.ms`); short so single consumers start at once.
    pub group_initial_rebalance_delay_ms: u64,
    /// Session timeouts clients may ask for (Kafka's `group.min/max.session.timeout.ms`).
    pub group_min_session_timeout_ms: u64,
    pub group_max_session_timeout_ms: u64,
    /// Consumer-protocol (KIP-848) members not heard from for this long are removed
    /// (Kafka's `group.consumer.session.timeout.ms`).
    pub group_consumer_session_timeout_ms: u64,
    /// How often consumer-protocol members heartbeat (Kafka's
    /// `group.consumer.heartbeat.interval.ms`); it bounds how fast they rebalance.
    pub group_consumer_heartbeat_interval_ms: u64,
    /// Longest `transaction.timeout.ms` a producer may ask for in InitProducerId
    /// (Kafka's `transaction.max.timeout.ms`; INVALID_TRANSACTION_TIMEOUT beyond it).
    pub transaction_max_timeout_ms: i32,
    /// A transactional id with no transaction in progress and unused this long is
    /// forgotten, with a tombstone in its internal log (`transactional.id.expiration.ms`).
    pub transactional_id_expiration_ms: i64,
    /// KIP-890 part 1 (`transaction.partition.verification.enable`): the first
    /// transactional batch of a transaction on a partition is checked with the
    /// coordinator, INVALID_TXN_STATE unless the partition was added to it.
    pub transaction_partition_verification_enable: bool,
}

impl Config {
    /// The group coordinator's settings from the `[kafka]` table.
    pub fn group_config(&self) -> nagare_core::groups::GroupConfig {
        nagare_core::groups::GroupConfig {
            initial_rebalance_delay_ms: self.group_initial_rebalance_delay_ms,
            min_session_timeout_ms: self.group_min_session_timeout_ms,
            max_session_timeout_ms: self.group_max_session_timeout_ms,
            consumer_session_timeout_ms: self.group_consumer_session_timeout_ms.max(1),
            consumer_heartbeat_interval_ms: self
                .group_consumer_heartbeat_interval_ms
                .clamp(1, i32::MAX as u64),
            ..Default::default()
        }
    }

    /// The transaction coordinator's settings from the `[kafka]` table.
    pub fn transaction_config(&self) -> nagare_core::transactions::TransactionConfig {
        nagare_core::transactions::TransactionConfig {
            max_timeout_ms: self.transaction_max_timeout_ms.max(1),
            id_expiration_ms: self.transactional_id_expiration_ms.max(1),
            partition_verification: self.transaction_partition_verification_enable,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            advertise: None,
            max_request_bytes: 100 * 1024 * 1024,
            queued_max_request_bytes: 100 * 1024 * 1024,
            max_pending_response_bytes: 1024 * 1024,
            max_fetch_wait_ms: 30_000,
            max_fetch_bytes: 64 * 1024 * 1024,
            group_initial_rebalance_delay_ms: 50,
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            group_consumer_session_timeout_ms: 45_000,
            group_consumer_heartbeat_interval_ms: 5_000,
            transaction_max_timeout_ms: 900_000,
            transactional_id_expiration_ms: 7 * 24 * 3600 * 1000,
            transaction_partition_verification_enable: true,
        }
    }
}

/// Serves one accepted connection until the client leaves, the connection fails, or the
/// server stops. Accepting, limits and shutdown are the listener layer's
/// ([`nagare_listener`]); `state` is built once per listener with [`KafkaState::new`].
pub async fn handle(conn: Connection, state: Arc<KafkaState>) {
    let peer = conn.peer;
    let session = Arc::new(
        session::Session::new(&state.security, conn.principal, peer, conn.auth_required)
            .with_info(conn.info.clone()),
    );
    if let Err(e) = connection::run(conn.stream, state, session, conn.shutdown).await {
        tracing::debug!(%peer, error = %e, "kafka connection closed");
    }
}
