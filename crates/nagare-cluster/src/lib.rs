//! nagare's cluster mode: the core's storage ([`nagare_core::store`]) over an Apache
//! Kafka cluster. A gateway keeps no topic data: its STOMP, forward and HTTP front ends
//! read and write the cluster's topics, so any number of gateways serve the same data,
//! and Kafka clients use the cluster directly.
//!
//! What lives where:
//! - the producer (`producer.rs`): one idempotent `acks=all` producer per gateway, for
//!   every append;
//! - the readers: the tail reader (`tail.rs`) follows the partitions local clients read
//!   into per-partition windows (`window.rs`, `log.rs`); the catch-up reader
//!   (`history.rs`) reads what lies before a window;
//! - the catalog (`catalog.rs`): topics, through metadata and the admin client;
//! - queues (`queue.rs`, `dispatch.rs`): Kafka share groups through
//!   [`nagare_share_client`] (librdkafka has no share consumer);
//! - temp-queue replies between gateways (`replies.rs`, `reply_id.rs`);
//! - health (`health.rs`): whether the cluster answers, probed in the background.
//!
//! librdkafka is built from the source the `rdkafka` crate vendors and linked
//! statically. This crate knows nothing of STOMP or forward.

mod block;
mod catalog;
pub mod config;
mod context;
mod dispatch;
pub mod error;
mod health;
mod history;
mod log;
mod producer;
mod queue;
mod replies;
mod reply_id;
mod tail;
mod window;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nagare_core::store::{
    ClusterCatalog, Readiness, RemoteLog, RemoteQueue, RemoteTopic, ReplyRouter,
};
use nagare_core::CoreError;
use nagare_share_client::ShareError;

pub use config::{check_properties, ClusterConfig, StoreUrl};
pub use error::ClusterError;

use catalog::Catalog;
use health::Health;
use history::History;
use producer::Producer;
use replies::KafkaReplies;
use tail::Tail;

/// How often the cluster is probed while it answers, and while it does not.
const PROBE_READY: Duration = Duration::from_secs(5);
const PROBE_NOT_READY: Duration = Duration::from_secs(1);
/// What the tail reader may read ahead per partition (KiB).
const TAIL_BUFFER_KIB: u32 = 16 * 1024;

/// The gateway's clients of the cluster, shared by its logs and queues.
pub(crate) struct Clients {
    pub(crate) config: ClusterConfig,
    pub(crate) health: Arc<Health>,
    pub(crate) producer: Producer,
    pub(crate) tail: Arc<Tail>,
    pub(crate) history: History,
    pub(crate) catalog: Catalog,
}

/// An Apache Kafka cluster as the store of a gateway.
pub struct KafkaCluster {
    clients: Arc<Clients>,
    replies: Arc<KafkaReplies>,
    closed: AtomicBool,
}

impl KafkaCluster {
    /// Makes the gateway's clients (no request is sent yet) and starts their threads.
    /// Call inside the tokio runtime, then [`start`](Self::start).
    pub fn connect(config: ClusterConfig) -> Result<Arc<KafkaCluster>, ClusterError> {
        config.check()?;
        let location = StoreUrl::Kafka(config.bootstrap.clone()).to_string();
        let health = Arc::new(Health::new(location));
        let producer = Producer::new(config.producer(), health.clone())?;
        let tail = Tail::start(config.reader("tail", false, TAIL_BUFFER_KIB), &health)?;
        let history = History::start(config.reader("catchup", true, history::BUFFER_KIB), &health)?;
        let catalog = Catalog::new(config.admin(), &health)?;
        let clients = Arc::new(Clients {
            config,
            health,
            producer,
            tail,
            history,
            catalog,
        });
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| ClusterError::Unavailable(format!("no async runtime: {e}")))?;
        let replies = KafkaReplies::new(clients.clone(), runtime);
        Ok(Arc::new(KafkaCluster {
            clients,
            replies,
            closed: AtomicBool::new(false),
        }))
    }

    /// Starts probing the cluster in the background: readiness, the share-group check
    /// and this gateway's reply topic once it answers.
    pub fn start(self: &Arc<Self>) {
        let me = self.clone();
        tokio::spawn(async move { me.probe().await });
    }

    /// Resolves with the reason when the gateway cannot run against this cluster (it
    /// offers no share groups): the caller stops the gateway.
    pub async fn failed(&self) -> String {
        self.clients.health.failed().await
    }

    /// Waits a little for unacknowledged records, then stops the readers.
    pub fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.clients.producer.flush(Duration::from_secs(2));
        self.clients.tail.stop();
        self.clients.history.stop();
    }

    async fn probe(self: Arc<Self>) {
        let health = self.clients.health.clone();
        let mut shares_checked = false;
        let mut replies_started = false;
        // Probes failed in a row: one alone can be a single slow broker (the request
        // went to it), two say the cluster does not answer.
        let mut failures = 0u32;
        while !self.closed.load(Ordering::SeqCst) {
            let clients = self.clients.clone();
            let answer = tokio::task::spawn_blocking(move || clients.catalog.all_topics()).await;
            let ready = match answer {
                Ok(Ok((_, brokers))) => {
                    failures = 0;
                    if !shares_checked {
                        match self.check_share_groups().await {
                            Ok(()) => shares_checked = true,
                            Err(Some(fatal)) => {
                                health.fail(fatal);
                                return;
                            }
                            Err(None) => {}
                        }
                    }
                    if shares_checked && !replies_started {
                        let replies = self.replies.clone();
                        match tokio::task::spawn_blocking(move || replies.start()).await {
                            Ok(Ok(())) => replies_started = true,
                            Ok(Err(e)) => health.not_ready(format!(
                                "cannot set up this gateway's reply topic: {e}"
                            )),
                            Err(_) => return,
                        }
                    }
                    if shares_checked && replies_started {
                        health.ready(brokers);
                    }
                    shares_checked && replies_started
                }
                Ok(Err(e)) => {
                    failures += 1;
                    if failures >= 2 || !health.readiness().is_ready() {
                        health.not_ready(format!(
                            "cannot reach the Kafka cluster at {}: {e}",
                            health.location()
                        ));
                    }
                    false
                }
                Err(_) => return,
            };
            tokio::time::sleep(if ready { PROBE_READY } else { PROBE_NOT_READY }).await;
        }
    }

    /// `Err(Some(reason))` when the cluster has no share groups, `Err(None)` when it
    /// could not be asked (said in the readiness, tried again).
    async fn check_share_groups(&self) -> Result<(), Option<String>> {
        let no_shares = |detail: String| {
            format!(
                "the Kafka cluster at {} does not offer share groups (KIP-932: Kafka 4.2 or \
                 newer, with share groups enabled), which cluster mode needs for STOMP queues: \
                 {detail}",
                self.clients.health.location()
            )
        };
        match nagare_share_client::share_groups_supported(&self.clients.config.share()).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(Some(no_shares(
                "its brokers do not list ShareGroupHeartbeat".into(),
            ))),
            Err(ShareError::Unsupported(detail)) => Err(Some(no_shares(detail))),
            Err(e) => {
                self.clients
                    .health
                    .not_ready(format!("cannot check the cluster for share groups: {e}"));
                Err(None)
            }
        }
    }
}

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        self.clients.tail.stop();
        self.clients.history.stop();
    }
}

impl ClusterCatalog for KafkaCluster {
    fn location(&self) -> String {
        self.clients.health.location().to_string()
    }

    fn readiness(&self) -> Readiness {
        self.clients.health.readiness()
    }

    fn list_topics(&self) -> Result<Vec<RemoteTopic>, CoreError> {
        self.clients.catalog.list_topics()
    }

    fn describe_topic(&self, name: &str) -> Result<Option<RemoteTopic>, CoreError> {
        self.clients
            .health
            .check()
            .map_err(CoreError::Unavailable)?;
        self.clients.catalog.describe_topic(name)
    }

    fn create_topic(
        &self,
        name: &str,
        partitions: u32,
        configs: &[(String, String)],
    ) -> Result<(), CoreError> {
        self.clients
            .health
            .check()
            .map_err(CoreError::Unavailable)?;
        self.clients.catalog.create_topic(name, partitions, configs)
    }

    fn delete_topic(&self, name: &str) -> Result<(), CoreError> {
        self.clients
            .health
            .check()
            .map_err(CoreError::Unavailable)?;
        self.clients.catalog.delete_topic(name)
    }

    fn create_partitions(&self, name: &str, total: u32) -> Result<(), CoreError> {
        self.clients
            .health
            .check()
            .map_err(CoreError::Unavailable)?;
        self.clients.catalog.create_partitions(name, total)
    }

    fn log(&self, topic: &str, partition: i32) -> Arc<dyn RemoteLog> {
        log::KafkaLog::new(topic, partition, self.clients.clone())
    }

    fn queue(&self, name: &str, topic: &str) -> Arc<dyn RemoteQueue> {
        queue::KafkaQueue::new(name, topic, self.clients.clone())
    }

    fn replies(&self) -> Arc<dyn ReplyRouter> {
        self.replies.clone()
    }
}
