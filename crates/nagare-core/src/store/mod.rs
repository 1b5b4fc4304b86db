//! The storage seam. A [`Broker`](crate::Broker) keeps its topics either in the embedded
//! log under its data directory (the default) or in an external cluster (cluster mode,
//! `--store kafka://...`). The front ends cannot tell which: they call the same
//! [`Partition`](crate::Partition) and [`Queue`](crate::queues::Queue) methods, and each
//! of those is backed by the embedded log or queue engine, or by the implementation of
//! the traits below (the `nagare-cluster` crate, over Apache Kafka).
//!
//! - [`ClusterCatalog`]: the cluster's topics and partitions (what exists, creating and
//!   deleting topics), whether the cluster answers ([`Readiness`]), and the factories of
//!   the other three.
//! - [`RemoteLog`]: one partition: appends acknowledged once the cluster has them
//!   (`acks=all`), decoded reads from an offset, and an end-offset watch that wakes
//!   readers the way the embedded log's does.
//! - [`RemoteQueue`]: a STOMP queue kept by the cluster (a Kafka share group): the
//!   gateway's consumers of the queue and how their ACK/NACK settle messages.
//! - [`ReplyRouter`]: temp-queue replies addressed to a temp queue another gateway owns.
//!
//! The core knows no client library: `nagare-core` has no dependency on Kafka clients.
//! Catalog calls block (each bounded by the cluster client's request timeout), as the
//! embedded log's topic creation does; they are made through `off_runtime`, like every
//! other blocking core call. Data calls are async.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use nagare_log::batch::NewRecord;
use nagare_log::AppendInfo;
use tokio::sync::watch;

use crate::queues::{ConsumerId, QueueSink, QueueStats};
use crate::{CoreError, RecordsRead};

/// A boxed future, for the trait objects of this module.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Whether the store can serve clients now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Not now, and why (shown by `/healthz` and logged).
    NotReady(String),
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        matches!(self, Readiness::Ready)
    }
}

/// A topic as the cluster describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteTopic {
    pub name: String,
    pub partitions: u32,
}

/// A partition's offsets: the first readable one, and the end (one past the last
/// record readers may see).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bounds {
    pub start: i64,
    pub end: i64,
}

/// The cluster: its topics, its health, and the remote logs, queues and reply router
/// over it.
pub trait ClusterCatalog: Send + Sync {
    /// Where the data lives, for people: `kafka://host:port,...`.
    fn location(&self) -> String;

    /// Whether the cluster answers now (cheap: the last probe's result).
    fn readiness(&self) -> Readiness;

    /// Every topic of the cluster that clients may use (the cluster's internal topics
    /// and nagare's own reply topics left out). Blocking.
    fn list_topics(&self) -> Result<Vec<RemoteTopic>, CoreError>;

    /// The topic `name`, `None` if the cluster has none. Blocking.
    fn describe_topic(&self, name: &str) -> Result<Option<RemoteTopic>, CoreError>;

    /// Creates a topic with `partitions` and the given topic configs (Kafka names), the
    /// replication factor being the cluster's default. Returns once the cluster knows
    /// it. Blocking.
    fn create_topic(
        &self,
        name: &str,
        partitions: u32,
        configs: &[(String, String)],
    ) -> Result<(), CoreError>;

    /// Deletes a topic. Blocking.
    fn delete_topic(&self, name: &str) -> Result<(), CoreError>;

    /// Grows a topic to `total` partitions. Blocking.
    fn create_partitions(&self, name: &str, total: u32) -> Result<(), CoreError>;

    /// The log of one partition (cheap: the reader starts when someone reads).
    fn log(&self, topic: &str, partition: i32) -> Arc<dyn RemoteLog>;

    /// The queue `name`, whose messages are in `topic`.
    fn queue(&self, name: &str, topic: &str) -> Arc<dyn RemoteQueue>;

    /// Temp-queue replies between gateways.
    fn replies(&self) -> Arc<dyn ReplyRouter>;
}

/// One partition of a topic in the cluster.
pub trait RemoteLog: Send + Sync {
    /// Appends records in order and returns where the first and the last landed, once
    /// the cluster has acknowledged every one of them (an idempotent producer with
    /// `acks=all`, so a retried send is never written twice). Records of other
    /// producers may land between them. Fails promptly when the cluster is unreachable,
    /// and within the producer's delivery timeout when it stops answering.
    fn append<'a>(
        &'a self,
        records: &'a [NewRecord],
    ) -> BoxFuture<'a, Result<AppendInfo, CoreError>>;

    /// Records from `offset` on, about `max_bytes` (at least one record when there is
    /// one): from the gateway's window of recent records when it holds them, else read
    /// from the cluster. Nothing when `offset` is at the end.
    fn read(&self, offset: i64, max_bytes: u64) -> BoxFuture<'_, Result<RecordsRead, CoreError>>;

    /// What [`read`](Self::read) would give from the window alone, without waiting
    /// (empty when the window does not hold `offset`).
    fn read_window(&self, offset: i64, max_bytes: u64) -> RecordsRead;

    /// The partition's offsets as the cluster says now; the reader starts following
    /// the partition from its end, so what is appended from then on is seen.
    fn bounds(&self) -> BoxFuture<'_, Result<Bounds, CoreError>>;

    /// The offsets as last seen, without asking the cluster.
    fn cached_bounds(&self) -> Bounds;

    /// A receiver that changes when the end moves (when the partition is followed) and
    /// when a reader should try again.
    fn watch(&self) -> watch::Receiver<i64>;
}

/// How a consumer settles a queue message (Kafka's AcknowledgeType).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// ACK: done, never delivered again.
    Accept,
    /// NACK with requeue: delivered again (to anyone).
    Release,
    /// NACK without requeue: never delivered again.
    Reject,
}

/// A queue kept by the cluster. Its consumers are this gateway's; the cluster shares
/// the messages among every gateway's consumers.
pub trait RemoteQueue: Send + Sync {
    /// Adds a consumer that may hold up to `prefetch` unsettled messages.
    fn subscribe(&self, sink: Arc<dyn QueueSink>, prefetch: usize) -> ConsumerId;
    /// Removes a consumer; its unsettled messages go back to the queue.
    fn unsubscribe(&self, consumer: ConsumerId);
    /// Settles the message `tag` ([`Delivery::offset`](crate::queues::Delivery)) and,
    /// with `cumulative`, every earlier one of this consumer. False if it is not in
    /// flight for this consumer.
    fn settle(&self, consumer: ConsumerId, tag: i64, cumulative: bool, how: Settlement) -> bool;
    /// Accepts many messages of one consumer (auto-ack).
    fn accept_many(&self, consumer: ConsumerId, tags: &[i64]);
    /// What this gateway sees of the queue.
    fn stats(&self) -> QueueStats;
}

/// A reply to a temp queue, on its way between gateways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The temp queue's id (what `reply-to` was rewritten to).
    pub to: String,
    /// The sender's headers, in order.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

/// Where replies for this gateway's temp queues arrive (the STOMP front end).
pub trait ReplyInbox: Send + Sync {
    fn deliver(&self, reply: Reply);
}

/// Temp-queue replies across gateways: each gateway's temp-queue ids name the gateway,
/// and a reply to another gateway's temp queue travels through that gateway's reply
/// topic in the cluster.
pub trait ReplyRouter: Send + Sync {
    /// What this gateway's temp-queue ids start with.
    fn id_prefix(&self) -> &str;
    /// Whether `id` names a temp queue of another gateway.
    fn is_elsewhere(&self, id: &str) -> bool;
    /// Sends replies to the gateways owning their temp queues; resolves once the
    /// cluster has them.
    fn send<'a>(&'a self, replies: &'a [Reply]) -> BoxFuture<'a, Result<(), CoreError>>;
    /// Where replies to this gateway's temp queues are handed.
    fn set_inbox(&self, inbox: Arc<dyn ReplyInbox>);
}

/// A record as a remote log takes it, from a decoded one.
pub(crate) fn new_record(r: nagare_log::batch::Record) -> NewRecord {
    NewRecord {
        key: r.key,
        value: r.value,
        headers: r.headers,
        timestamp: r.timestamp,
    }
}

#[cfg(test)]
mod tests;
