//! The cluster as the client knows it: one connection per broker node (made on first
//! use, made again once it died), the bootstrap brokers until the first metadata names
//! the nodes, the topics' ids and partition leaders (Metadata), and the share group's
//! coordinator (FindCoordinator with key type GROUP).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::{Mutex, RwLock};
use tokio::time::Instant;
use uuid::Uuid;

use crate::config::Settings;
use crate::connection::Conn;
use crate::error::code;
use crate::ShareError;

/// Metadata 10 is the first with topic ids.
const METADATA_VERSIONS: std::ops::RangeInclusive<i16> = 10..=13;
/// FindCoordinator 4 is the first with a list of keys (what Kafka 4 clients send).
const FIND_COORDINATOR_VERSIONS: std::ops::RangeInclusive<i16> = 4..=6;
/// FindCoordinator's key type for groups (share groups included).
const KEY_TYPE_GROUP: i8 = 0;

/// `host:port`, with an IPv6 address in brackets.
fn host_port(host: &str, port: i32) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
enum Target {
    Node(i32),
    Bootstrap(usize),
}

type Slot = Arc<tokio::sync::Mutex<Option<Arc<Conn>>>>;

#[derive(Default)]
struct Metadata {
    /// `host:port` of each node.
    brokers: HashMap<i32, String>,
    topics: HashMap<Arc<str>, TopicMeta>,
    names: HashMap<Uuid, Arc<str>>,
    generation: u64,
    stale: bool,
}

struct TopicMeta {
    id: Uuid,
    /// Partition index → leader node (-1: none right now).
    leaders: HashMap<i32, i32>,
}

pub(crate) struct Cluster {
    settings: Arc<Settings>,
    slots: Mutex<HashMap<Target, Slot>>,
    meta: RwLock<Metadata>,
    /// One metadata refresh at a time; the others wait for it instead of repeating it.
    refreshing: tokio::sync::Mutex<()>,
}

impl Cluster {
    pub(crate) fn new(settings: Arc<Settings>) -> Arc<Cluster> {
        Arc::new(Cluster {
            settings,
            slots: Mutex::new(HashMap::new()),
            meta: RwLock::new(Metadata::default()),
            refreshing: tokio::sync::Mutex::new(()),
        })
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    fn slot(&self, target: Target) -> Slot {
        self.slots.lock().entry(target).or_default().clone()
    }

    fn address(&self, target: Target) -> Option<String> {
        match target {
            Target::Node(id) => self.meta.read().brokers.get(&id).cloned(),
            Target::Bootstrap(i) => self.settings.bootstrap.get(i).cloned(),
        }
    }

    async fn connect(&self, target: Target) -> Result<Arc<Conn>, ShareError> {
        let slot = self.slot(target);
        let mut slot = slot.lock().await;
        if let Some(conn) = slot.as_ref().filter(|c| c.is_alive()) {
            return Ok(conn.clone());
        }
        *slot = None;
        let Some(addr) = self.address(target) else {
            self.mark_stale();
            return Err(ShareError::Unreachable(format!(
                "{target:?} has no known address"
            )));
        };
        let conn = Arc::new(Conn::connect(&addr, &self.settings).await?);
        tracing::debug!(?target, %addr, "connected");
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// The connection to broker `node`.
    pub(crate) async fn node(&self, node: i32) -> Result<Arc<Conn>, ShareError> {
        self.connect(Target::Node(node)).await
    }

    /// A connection to any broker: one already open, else the known nodes, else the
    /// bootstrap list; all within one request timeout.
    pub(crate) async fn any(&self) -> Result<Arc<Conn>, ShareError> {
        let open: Vec<Slot> = self.slots.lock().values().cloned().collect();
        for slot in open {
            if let Ok(slot) = slot.try_lock() {
                if let Some(conn) = slot.as_ref().filter(|c| c.is_alive()) {
                    return Ok(conn.clone());
                }
            }
        }
        let mut targets: Vec<Target> = self
            .meta
            .read()
            .brokers
            .keys()
            .map(|&n| Target::Node(n))
            .collect();
        targets.sort_by_key(|t| match t {
            Target::Node(n) => *n,
            Target::Bootstrap(_) => 0,
        });
        targets.extend((0..self.settings.bootstrap.len()).map(Target::Bootstrap));
        let deadline = Instant::now() + self.settings.request_timeout;
        let mut failures: Vec<ShareError> = Vec::new();
        for target in targets {
            match tokio::time::timeout_at(deadline, self.connect(target)).await {
                Ok(Ok(conn)) => return Ok(conn),
                Ok(Err(e)) => failures.push(e),
                Err(_) => {
                    failures.push(ShareError::Unreachable(format!("{target:?}: out of time")));
                    break;
                }
            }
        }
        // A broker that answered but refused (a login, a TLS name, a version) says more
        // than the ones that did not answer.
        if let Some(refused) = failures
            .iter()
            .find(|e| !matches!(e, ShareError::Unreachable(_)))
        {
            return Err(refused.clone());
        }
        let all: Vec<String> = failures
            .into_iter()
            .map(|e| match e {
                ShareError::Unreachable(why) => why,
                other => other.to_string(),
            })
            .collect();
        Err(ShareError::Unreachable(all.join("; ")))
    }

    /// Asks for the metadata of `topics` (names, ids, leaders, the brokers), unless a
    /// refresh that started after this call was made already answered it.
    pub(crate) async fn refresh(&self, topics: &[Arc<str>]) -> Result<(), ShareError> {
        let seen = self.meta.read().generation;
        let _one = self.refreshing.lock().await;
        {
            let meta = self.meta.read();
            if meta.generation != seen && !meta.stale {
                return Ok(());
            }
        }
        let req = MetadataRequest::default()
            .with_topics(Some(
                topics
                    .iter()
                    .map(|t| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(t.to_string()))))
                    })
                    .collect(),
            ))
            .with_allow_auto_topic_creation(false);
        // A connection may have died since it was last used: one more try on another.
        let mut last = None;
        for _ in 0..2 {
            let conn = self.any().await?;
            let v = conn.require(ApiKey::Metadata, METADATA_VERSIONS)?;
            match conn.request(&req, v, Duration::ZERO).await {
                Ok(resp) => {
                    self.apply(resp);
                    self.drop_bootstrap();
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ShareError::Unreachable("metadata".into())))
    }

    fn apply(&self, resp: MetadataResponse) {
        let mut meta = self.meta.write();
        if !resp.brokers.is_empty() {
            meta.brokers = resp
                .brokers
                .iter()
                .map(|b| (b.node_id.0, host_port(&b.host, b.port)))
                .collect();
        }
        for t in resp.topics {
            let Some(name) = t.name.as_ref().map(|n| Arc::<str>::from(n.0.as_str())) else {
                continue;
            };
            match t.error_code {
                code::NONE | code::LEADER_NOT_AVAILABLE => {
                    let leaders = t
                        .partitions
                        .iter()
                        .map(|p| (p.partition_index, p.leader_id.0))
                        .collect();
                    meta.names.insert(t.topic_id, name.clone());
                    meta.topics.insert(
                        name,
                        TopicMeta {
                            id: t.topic_id,
                            leaders,
                        },
                    );
                }
                code::UNKNOWN_TOPIC_OR_PARTITION => {
                    if let Some(old) = meta.topics.remove(&name) {
                        meta.names.remove(&old.id);
                    }
                }
                other => {
                    tracing::warn!(topic = %name, error = %ShareError::kafka(other, None), "topic metadata refused")
                }
            }
        }
        meta.generation += 1;
        meta.stale = false;
    }

    /// Once the nodes are known, bootstrap connections are closed: one connection per
    /// node (a bootstrap address is also a node, under its node id).
    fn drop_bootstrap(&self) {
        self.slots
            .lock()
            .retain(|t, _| matches!(t, Target::Node(_)));
    }

    /// Whether any metadata answer came yet.
    pub(crate) fn has_metadata(&self) -> bool {
        self.meta.read().generation > 0
    }

    pub(crate) fn mark_stale(&self) {
        self.meta.write().stale = true;
    }

    /// Whether the metadata must be asked again before `topics` can be used.
    pub(crate) fn needs_refresh(&self, ids: impl IntoIterator<Item = Uuid>) -> bool {
        let meta = self.meta.read();
        meta.stale
            || meta.generation == 0
            || ids.into_iter().any(|id| !meta.names.contains_key(&id))
    }

    pub(crate) fn topic_name(&self, id: Uuid) -> Option<Arc<str>> {
        self.meta.read().names.get(&id).cloned()
    }

    pub(crate) fn topic_id(&self, topic: &str) -> Option<Uuid> {
        self.meta.read().topics.get(topic).map(|t| t.id)
    }

    /// The leader of a partition, if it has one right now.
    pub(crate) fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        let meta = self.meta.read();
        let leader = *meta.topics.get(topic)?.leaders.get(&partition)?;
        (leader >= 0).then_some(leader)
    }

    /// The node coordinating `group` (registered with its address).
    pub(crate) async fn find_coordinator(&self, group: &str) -> Result<i32, ShareError> {
        let conn = self.any().await?;
        let v = conn.require(ApiKey::FindCoordinator, FIND_COORDINATOR_VERSIONS)?;
        let req = FindCoordinatorRequest::default()
            .with_key_type(KEY_TYPE_GROUP)
            .with_coordinator_keys(vec![StrBytes::from_string(group.to_string())]);
        let resp = conn.request(&req, v, Duration::ZERO).await?;
        let c = resp.coordinators.first().ok_or_else(|| {
            ShareError::Protocol("FindCoordinator answered no coordinator".into())
        })?;
        if c.error_code != code::NONE {
            return Err(ShareError::kafka(c.error_code, c.error_message.as_ref()));
        }
        self.meta
            .write()
            .brokers
            .insert(c.node_id.0, host_port(&c.host, c.port));
        Ok(c.node_id.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_of_nodes() {
        assert_eq!(host_port("10.0.0.1", 9092), "10.0.0.1:9092");
        assert_eq!(host_port("kafka-1", 9093), "kafka-1:9093");
        assert_eq!(host_port("::1", 9092), "[::1]:9092");
    }
}
