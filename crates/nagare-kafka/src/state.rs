//! What every connection of one Kafka listener shares.

use std::sync::Arc;

use nagare_core::groups::GroupCoordinator;
use nagare_core::producers::Producers;
use nagare_core::{Broker, CoreError};
use tokio::net::TcpListener;

use crate::memory_pool::RequestPool;
use crate::Config;

/// Shared per-listener state, handed to every handler as `Arc<KafkaState>`.
///
/// Other subsystems (e.g. the consumer-group coordinator) add a field here and build it
/// in [`KafkaState::new`].
pub struct KafkaState {
    pub broker: Arc<Broker>,
    pub config: Config,
    /// Producer ids, epochs and sequences (idempotent producers).
    pub producers: Arc<Producers>,
    /// Consumer groups and committed offsets (the coordinator is this broker).
    pub groups: Arc<GroupCoordinator>,
    /// Memory for requests read but not yet answered, shared by every connection.
    pub request_pool: RequestPool,
    /// Host and port given to clients in Metadata, FindCoordinator, DescribeCluster.
    pub advertised_host: String,
    pub advertised_port: i32,
}

impl KafkaState {
    pub fn new(
        broker: Arc<Broker>,
        config: Config,
        listener: &TcpListener,
    ) -> Result<KafkaState, CoreError> {
        let local = listener.local_addr().ok();
        let (host, port) = advertised(config.advertise.as_deref(), local);
        KafkaState::with_address(broker, config, host, port)
    }

    /// The state for a listener known to clients as `host:port`.
    pub fn with_address(
        broker: Arc<Broker>,
        config: Config,
        advertised_host: String,
        advertised_port: i32,
    ) -> Result<KafkaState, CoreError> {
        let (producers, writer) = Producers::open(&broker)?;
        let producers = Arc::new(producers);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn(writer.run())),
            // Without a runtime nothing stores allocations: InitProducerId fails rather
            // than hangs, as the writer (and with it the log's queue) is dropped.
            Err(_) => tracing::warn!("producer ids opened outside a tokio runtime"),
        }
        let (groups, background) = GroupCoordinator::open(&broker, config.group_config())?;
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn(background.run())),
            // Without a runtime nothing is stored: commits fail with
            // COORDINATOR_NOT_AVAILABLE rather than hang.
            Err(_) => tracing::warn!("group coordinator opened outside a tokio runtime"),
        }
        Ok(KafkaState {
            broker,
            request_pool: RequestPool::new(config.queued_max_request_bytes),
            config,
            producers,
            groups,
            advertised_host,
            advertised_port,
        })
    }

    pub fn node_id(&self) -> i32 {
        self.broker.node_id()
    }
}

/// Splits `host:port` (or `[v6]:port`); falls back to the listener's address.
fn advertised(advertise: Option<&str>, local: Option<std::net::SocketAddr>) -> (String, i32) {
    if let Some(a) = advertise {
        if let Some((host, port)) = a.rsplit_once(':') {
            if let Ok(port) = port.parse::<u16>() {
                let host = host.trim_start_matches('[').trim_end_matches(']');
                return (host.to_string(), port as i32);
            }
        }
    }
    match local {
        Some(addr) => (addr.ip().to_string(), addr.port() as i32),
        None => ("127.0.0.1".to_string(), 9092),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertise_parses_host_and_port() {
        assert_eq!(
            advertised(Some("example:19092"), None),
            ("example".into(), 19092)
        );
        assert_eq!(advertised(Some("[::1]:9"), None), ("::1".into(), 9));
        let local = "127.0.0.1:7".parse().ok();
        assert_eq!(advertised(None, local), ("127.0.0.1".into(), 7));
    }
}
