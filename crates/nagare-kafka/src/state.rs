//! What every connection of one Kafka listener shares.

use std::sync::Arc;

use nagare_core::groups::GroupCoordinator;
use nagare_core::producers::Producers;
use nagare_core::security::Security;
use nagare_core::transactions::TransactionCoordinator;
use nagare_core::{Broker, Subsystems};
use tokio::net::TcpListener;

use crate::memory_pool::RequestPool;
use crate::Config;

/// Shared per-listener state, handed to every handler as `Arc<KafkaState>`.
///
/// The core subsystems come opened from the caller (the binary opens them once, beside
/// the broker); a new one used by Kafka adds a field here.
pub struct KafkaState {
    pub broker: Arc<Broker>,
    pub config: Config,
    /// Producer ids, epochs and sequences (idempotent producers).
    pub producers: Arc<Producers>,
    /// Consumer groups and committed offsets (the coordinator is this broker).
    pub groups: Arc<GroupCoordinator>,
    /// Share groups (KIP-932) on the queues.
    pub share: Arc<nagare_core::share_groups::ShareGroups>,
    /// Users, ACLs and the login throttle.
    pub security: Security,
    /// Transactional ids and their transactions (the coordinator is this broker).
    pub transactions: Arc<TransactionCoordinator>,
    /// Memory for requests read but not yet answered, shared by every connection.
    pub request_pool: RequestPool,
    /// Host and port given to clients in Metadata, FindCoordinator, DescribeCluster.
    pub advertised_host: String,
    pub advertised_port: i32,
}

impl KafkaState {
    pub fn new(
        broker: Arc<Broker>,
        core: &Subsystems,
        config: Config,
        listener: &TcpListener,
    ) -> KafkaState {
        let local = listener.local_addr().ok();
        let (host, port) = advertised(config.advertise.as_deref(), local);
        KafkaState::with_address(broker, core, config, host, port)
    }

    /// The state for a listener known to clients as `host:port`.
    pub fn with_address(
        broker: Arc<Broker>,
        core: &Subsystems,
        config: Config,
        advertised_host: String,
        advertised_port: i32,
    ) -> KafkaState {
        KafkaState {
            broker,
            request_pool: RequestPool::new(config.queued_max_request_bytes),
            config,
            producers: core.producers.clone(),
            groups: core.groups.clone(),
            share: core.share_groups.clone(),
            security: core.security.clone(),
            transactions: core.transactions.clone(),
            advertised_host,
            advertised_port,
        }
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
        // A wildcard bind is no address a client can use: give the machine's name, as
        // Kafka gives its canonical host name.
        Some(addr) if addr.ip().is_unspecified() => (host_name(), addr.port() as i32),
        Some(addr) => (addr.ip().to_string(), addr.port() as i32),
        None => ("127.0.0.1".to_string(), 9092),
    }
}

/// This machine's host name (`uname -n`), or `localhost` if it has none.
fn host_name() -> String {
    let uname = rustix::system::uname();
    let name = uname.nodename().to_string_lossy();
    if name.is_empty() {
        "localhost".to_string()
    } else {
        name.into_owned()
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
        let wildcard = "0.0.0.0:8".parse().ok();
        let (host, port) = advertised(None, wildcard);
        assert!(!host.is_empty() && host != "0.0.0.0" && port == 8, "{host}");
    }
}
