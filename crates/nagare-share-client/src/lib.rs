//! A Kafka share-group consumer (KIP-932: ShareGroupHeartbeat, ShareFetch,
//! ShareAcknowledge) for nagare's cluster mode, where STOMP `/queue/Q` is the share group
//! `Q` on topic `queue.Q` of an external Kafka cluster.
//!
//! Why by hand: the cluster side of nagare uses librdkafka (the `rdkafka` crate) for
//! everything else, but the librdkafka it vendors (2.12) has no share consumer, and the
//! rest of the client would only be a thin layer over the `kafka-protocol` codec nagare
//! already uses for its own Kafka front end. This crate is that thin layer, no more:
//! discovery, the share-group heartbeat, share sessions, fetch and acknowledge.
//!
//! Where things are: `connection` (one broker connection: framing, correlation ids,
//! timeouts, bounded reads), `security` and `scram` (TLS and SASL), `cluster` (bootstrap,
//! metadata, coordinator), `membership` (the heartbeat), `session` (share session epochs),
//! `fetch` (ShareFetch and ShareAcknowledge on the wire, reading acquired records), `acks`
//! (pending acknowledgements and their batches), `consumer` (poll, flush and close
//! tying them together), `admin` (group configs). `nagare_kafka_guard` walks every response
//! before the codec decodes it, so a count read from the wire never sizes an allocation.
//!
//! Behaviour worth knowing:
//! - `poll` fetches from every broker leading an assigned partition at once, each fetch in
//!   a task of its own; records acquired beyond `max_records`, or arriving after `poll`
//!   returned, wait in a buffer for the next `poll` (they stay locked for this member).
//! - Transient errors (a leader or coordinator moving, a share session to reopen, one
//!   broker down) are retried inside `poll` with backoff (`retry.backoff.ms` doubling up
//!   to `retry.backoff.max.ms`). When the brokers it fetches from (or, with nothing
//!   assigned, the coordinator) cannot be reached, `poll` answers
//!   [`ShareError::Unreachable`] once its `wait` or the request timeout, whichever is
//!   shorter, has passed; a broker that stopped answering is given up after the request
//!   timeout (plus the fetch's own wait). It never answers in a burst, so a caller may
//!   poll in a loop, and it carries on by itself when the cluster is back.
//! - Acknowledgements ride on the next fetch to the partition's leader; `flush` sends
//!   them at once; `close` sends them and closes the share sessions, which hands every
//!   record still held back to the group, then leaves it.
//! - Acquired offsets holding no record (transaction markers, compacted records) are
//!   acknowledged as GAP by the client itself, and those of an undecodable batch as
//!   REJECT, as Kafka's Java consumer does.
//! - While a member has no partition (just joined: Kafka assigns a partition once its
//!   share state is initialized), it heartbeats every 500 ms instead of the
//!   coordinator's interval, so the first records come without a 5 s wait.
//!
//! Limits: ShareFetch and ShareAcknowledge v1 only (the codec's versions; v2's lock
//! renewal and acquire modes are not used); SASL PLAIN and SCRAM only (no GSSAPI,
//! OAUTHBEARER), unencrypted client keys only; acknowledgements for a broker without a
//! share session when the consumer closes are dropped (their records come back when the
//! acquisition lock runs out).

mod acks;
mod admin;
mod cluster;
mod config;
mod connection;
mod consumer;
mod error;
mod error_names;
mod fetch;
mod membership;
mod scram;
mod security;
mod session;

use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use kafka_protocol::messages::ApiKey;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use admin::set_group_configs;
pub use error::ShareError;
pub use nagare_log::batch::Record;

use acks::AckRange;
use cluster::Cluster;
use config::Settings;
use connection::Conn;
use consumer::Shared;
use membership::{Membership, Next};

/// How to reach the cluster: Kafka client property names, as in `[store.kafka]`.
///
/// Properties read (others are ignored: the same table configures librdkafka):
/// `security.protocol` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), `sasl.mechanism` or
/// `sasl.mechanisms` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), `sasl.username`,
/// `sasl.password`, `ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`,
/// `ssl.endpoint.identification.algorithm` (https, none), `fetch.wait.max.ms` (500),
/// `fetch.max.bytes` (50 MiB), `receive.message.max.bytes` (100 MB, the largest response
/// accepted), `retry.backoff.ms` (100), `retry.backoff.max.ms` (1000), `client.rack`.
#[derive(Debug, Clone, Default)]
pub struct ShareClientConfig {
    /// `host:port` of one or more brokers.
    pub bootstrap: Vec<String>,
    /// Sent as the request header's client id.
    pub client_id: String,
    /// Kafka client properties (`security.protocol`, `sasl.mechanism`,
    /// `sasl.username`, `sasl.password`, `ssl.ca.location`, ...).
    pub properties: Vec<(String, String)>,
    /// Bound of every request round trip (zero: Kafka's default, 30 s).
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

/// A member of one share group, subscribed to some topics.
pub struct ShareConsumer {
    shared: Arc<Shared>,
    heartbeat: Option<JoinHandle<()>>,
    stop: watch::Sender<bool>,
}

impl Drop for ShareConsumer {
    fn drop(&mut self) {
        // Dropped without `close`: the heartbeat stops, the coordinator times the member
        // out and the records it held come back when their locks run out.
        if let Some(h) = self.heartbeat.take() {
            h.abort();
        }
    }
}

/// A member id as Kafka's clients make them: 16 random bytes in URL-safe base64 (the
/// broker parses share members' ids as such), never starting with '-'.
fn new_member_id() -> String {
    loop {
        let id = URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes());
        if !id.starts_with('-') {
            return id;
        }
    }
}

/// The share-group APIs this client needs, at the versions it speaks.
fn share_support(conn: &Conn) -> Result<(), String> {
    let needed = [
        (ApiKey::ShareGroupHeartbeat, "ShareGroupHeartbeat"),
        (ApiKey::ShareFetch, "ShareFetch"),
        (ApiKey::ShareAcknowledge, "ShareAcknowledge"),
    ];
    let missing: Vec<&str> = needed
        .iter()
        .filter(|(key, _)| conn.version(*key, 1..=1).is_none())
        .map(|(_, name)| *name)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} offers no {} v1",
            conn.addr(),
            missing.join(", ")
        ))
    }
}

impl ShareConsumer {
    /// Joins `group` subscribed to `topics` (ShareGroupHeartbeat with member epoch 0).
    ///
    /// Fails at once with [`ShareError::Unreachable`] when no bootstrap broker answers,
    /// with [`ShareError::Unsupported`] when the cluster has no share groups; a
    /// coordinator that is not ready yet is waited for up to the request timeout.
    pub async fn join(
        config: ShareClientConfig,
        group: &str,
        topics: Vec<String>,
    ) -> Result<ShareConsumer, ShareError> {
        if topics.is_empty() {
            return Err(ShareError::Config("a share consumer needs topics".into()));
        }
        let settings = Arc::new(Settings::from_config(&config)?);
        let cluster = Cluster::new(settings.clone());
        let conn = cluster.any().await?;
        share_support(&conn).map_err(ShareError::Unsupported)?;
        let member_id = new_member_id();
        let topics = topics.into_iter().map(Arc::from).collect();
        let membership = Membership::new(cluster.clone(), group, &member_id, topics);
        let deadline = Instant::now() + settings.request_timeout;
        let mut failures = 0;
        let first = loop {
            match membership.beat().await {
                Next::Beat(interval, _) => break interval,
                Next::Failed(e) => return Err(e),
                Next::Rejoin(e) | Next::Rediscover(e) => {
                    let pause = settings.backoff_for(failures);
                    failures += 1;
                    if Instant::now() + pause >= deadline {
                        return Err(e);
                    }
                    tokio::time::sleep(pause).await;
                }
            }
        };
        tracing::debug!(group, member = %member_id, "joined the share group");
        let shared = Arc::new(Shared::new(
            settings,
            cluster,
            membership.clone(),
            group,
            &member_id,
        ));
        let (stop, stopped) = watch::channel(false);
        let first = membership.after_beat(first);
        let heartbeat = tokio::spawn(membership.run(first, stopped));
        Ok(ShareConsumer {
            shared,
            heartbeat: Some(heartbeat),
            stop,
        })
    }

    /// Waits up to `wait` for records and returns at most about `max_records` of them,
    /// acquired for this member. Acknowledgements noted since the last call ride along.
    pub async fn poll(
        &self,
        max_records: usize,
        wait: Duration,
    ) -> Result<Vec<ShareRecord>, ShareError> {
        self.shared.poll(max_records, wait).await
    }

    /// Notes how an acquired record is settled; sent with the next poll or flush.
    pub fn acknowledge(&self, topic: &str, partition: i32, offset: i64, kind: AckKind) {
        self.shared.note_ack(
            topic,
            partition,
            AckRange {
                first: offset,
                last: offset,
                kind: kind.into(),
            },
        );
    }

    /// Sends the noted acknowledgements now (ShareAcknowledge) and waits for the answer.
    ///
    /// A broker's fetch in flight is waited for (its session takes one request at a
    /// time). A record whose acknowledgement was refused (its lock had run out, so it was
    /// or will be delivered again) makes this a [`ShareError::Kafka`]; the others were
    /// still settled. Acknowledgements for a broker whose share session was just lost stay
    /// noted and ride on the next fetch.
    pub async fn flush(&self) -> Result<(), ShareError> {
        self.shared.flush().await
    }

    /// Sends the noted acknowledgements, closes the share sessions and leaves the group
    /// (member epoch -1): what it still held goes back to the group at once.
    pub async fn close(mut self) -> Result<(), ShareError> {
        let _ = self.stop.send(true);
        if let Some(h) = self.heartbeat.take() {
            let limit = self.shared.settings.request_timeout;
            if tokio::time::timeout(limit, h).await.is_err() {
                tracing::debug!("heartbeat did not stop in time");
            }
        }
        self.shared.close().await
    }

    /// This member's id (Kafka's member ids of share groups are made by the client).
    pub fn member_id(&self) -> &str {
        &self.shared.member_id
    }

    /// The partitions assigned to this member now, by topic name.
    pub fn assignment(&self) -> Vec<(Arc<str>, i32)> {
        let view = self.shared.membership.view();
        self.shared
            .assignment(&view)
            .into_iter()
            .map(|sp| (sp.topic, sp.partition))
            .collect()
    }
}

/// Whether the cluster offers share groups (ShareGroupHeartbeat in ApiVersions).
pub async fn share_groups_supported(config: &ShareClientConfig) -> Result<bool, ShareError> {
    let cluster = Cluster::new(Arc::new(Settings::from_config(config)?));
    let conn = cluster.any().await?;
    Ok(share_support(&conn).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_ids_are_kafka_uuids() {
        for _ in 0..100 {
            let id = new_member_id();
            assert_eq!(id.len(), 22);
            assert!(!id.starts_with('-'));
            assert_eq!(URL_SAFE_NO_PAD.decode(&id).unwrap().len(), 16);
        }
    }

    /// Compiles only if the consumer can be shared between tasks and its futures moved
    /// into `tokio::spawn`.
    #[allow(dead_code)]
    fn usable_from_any_task(c: &'static ShareConsumer, config: &'static ShareClientConfig) {
        fn send<T: Send>(_: T) {}
        fn shared<T: Send + Sync>(_: &T) {}
        shared(c);
        send(c.poll(1, Duration::ZERO));
        send(c.flush());
        send(ShareConsumer::join(config.clone(), "g", vec![]));
        send(share_groups_supported(config));
        send(set_group_configs(config, "g", &[]));
    }

    #[tokio::test]
    async fn an_unreachable_cluster_is_said_at_once() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        let config = ShareClientConfig {
            bootstrap: vec![addr],
            request_timeout: Duration::from_secs(5),
            ..Default::default()
        };
        let started = std::time::Instant::now();
        let err = ShareConsumer::join(config.clone(), "g", vec!["t".into()])
            .await
            .err()
            .unwrap();
        assert!(matches!(err, ShareError::Unreachable(_)), "{err}");
        assert!(matches!(
            share_groups_supported(&config).await,
            Err(ShareError::Unreachable(_))
        ));
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
