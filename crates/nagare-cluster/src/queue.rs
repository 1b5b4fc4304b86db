//! A STOMP queue in cluster mode: `/queue/Q` is the Kafka share group `Q` over topic
//! `queue.Q`. While this gateway has consumers of the queue, one member of the group
//! (a share consumer) acquires records for them, as many as they have room for; the
//! cluster shares the records among every gateway's members, so each message goes to
//! one consumer at a time across gateways. ACK, NACK and NACK without requeue become
//! ACCEPT, RELEASE and REJECT; a consumer leaving releases what it held; the delivery
//! count is the cluster's.
//!
//! Before the first member joins, the group is set to start at the topic's beginning
//! (`share.auto.offset.reset=earliest`): a queue keeps what was sent before anyone
//! consumed, as STOMP queues do. Records stay locked for a member for the group's
//! `share.record.lock.duration.ms` (30 s by default): a message held unacknowledged
//! longer goes to another consumer.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use nagare_core::queues::{ConsumerId, QueueSink, QueueStats};
use nagare_core::store::{RemoteQueue, Settlement};
use nagare_share_client::{AckKind, ShareConsumer, ShareError};
use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;

use crate::dispatch::{Dispatch, Held};
use crate::Clients;

/// How long a poll waits for records.
const POLL_WAIT: Duration = Duration::from_millis(500);
/// A member whose gateway has had no consumer of the queue for this long leaves the
/// group (what it still held goes back at once).
const IDLE_LEAVE: Duration = Duration::from_secs(5);
/// Pause after a failure, doubling up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

pub(crate) struct KafkaQueue {
    group: String,
    topic: String,
    clients: Arc<Clients>,
    dispatch: Mutex<Dispatch>,
    /// The current member and its number (settlements name the member that acquired).
    member: RwLock<Option<(u64, Arc<ShareConsumer>)>>,
    members: AtomicU64,
    wake: Notify,
    running: AtomicBool,
    /// The group's start was set (once per gateway and queue).
    configured: AtomicBool,
    me: Weak<KafkaQueue>,
}

impl KafkaQueue {
    pub(crate) fn new(group: &str, topic: &str, clients: Arc<Clients>) -> Arc<KafkaQueue> {
        Arc::new_cyclic(|me| KafkaQueue {
            group: group.to_string(),
            topic: topic.to_string(),
            clients,
            dispatch: Mutex::new(Dispatch::default()),
            member: RwLock::new(None),
            members: AtomicU64::new(0),
            wake: Notify::new(),
            running: AtomicBool::new(false),
            configured: AtomicBool::new(false),
            me: me.clone(),
        })
    }

    /// Tells the cluster how messages were settled (with the next poll or flush).
    fn acknowledge(&self, held: &[Held], kind: AckKind) {
        if held.is_empty() {
            return;
        }
        if let Some((number, member)) = &*self.member.read() {
            for h in held.iter().filter(|h| h.member == *number) {
                member.acknowledge(&h.topic, h.partition, h.offset, kind);
            }
        }
        self.wake.notify_one();
    }

    fn ensure_running(&self) {
        if self.running.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(me) = self.me.upgrade() {
            tokio::spawn(me.run());
        }
    }

    /// Waits for a settlement, a new consumer or `timeout`.
    async fn pause(&self, timeout: Duration) {
        tokio::select! {
            _ = self.wake.notified() => {}
            _ = tokio::time::sleep(timeout) => {}
        }
    }

    /// The member's loop: join, acquire what the consumers have room for, hand it out,
    /// send settlements; leave once the gateway has had no consumer for a while.
    async fn run(self: Arc<Self>) {
        let mut idle_since: Option<Instant> = None;
        let mut backoff = MIN_BACKOFF;
        let mut failing = false;
        loop {
            let (credit, consumers) = {
                let d = self.dispatch.lock();
                (d.credit(), d.has_consumers())
            };
            if !consumers {
                let since = *idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= IDLE_LEAVE {
                    self.leave().await;
                    self.running.store(false, Ordering::SeqCst);
                    // A consumer that came meanwhile found the loop still running.
                    if self.dispatch.lock().has_consumers() {
                        self.ensure_running();
                    }
                    return;
                }
                self.flush().await;
                self.pause(Duration::from_secs(1)).await;
                continue;
            }
            idle_since = None;
            let member = match self.member_or_join().await {
                Ok(m) => m,
                Err(e) => {
                    if !failing {
                        failing = true;
                        tracing::warn!(queue = %self.group, error = %e, "cannot join the queue's share group; retrying");
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            if credit == 0 {
                self.flush().await;
                self.pause(Duration::from_secs(1)).await;
                continue;
            }
            match member.1.poll(credit, POLL_WAIT).await {
                Ok(records) => {
                    if failing {
                        failing = false;
                        tracing::info!(queue = %self.group, "the queue's share group answers again");
                    }
                    backoff = MIN_BACKOFF;
                    if records.is_empty() {
                        continue;
                    }
                    let out = self.dispatch.lock().dispatch(member.0, records);
                    self.acknowledge(&out.accepted, AckKind::Accept);
                    self.acknowledge(&out.unplaced, AckKind::Release);
                }
                Err(e) => {
                    if !failing {
                        failing = true;
                        tracing::warn!(queue = %self.group, error = %e, "share fetch failed; retrying");
                    }
                    if matches!(e, ShareError::Closed) {
                        *self.member.write() = None;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    async fn member_or_join(&self) -> Result<(u64, Arc<ShareConsumer>), ShareError> {
        if let Some(m) = &*self.member.read() {
            return Ok(m.clone());
        }
        if !self.configured.load(Ordering::SeqCst) {
            self.start_at_beginning().await?;
            self.configured.store(true, Ordering::SeqCst);
        }
        let consumer = ShareConsumer::join(
            self.clients.config.share(),
            &self.group,
            vec![self.topic.clone()],
        )
        .await?;
        let number = self.members.fetch_add(1, Ordering::SeqCst) + 1;
        let member = (number, Arc::new(consumer));
        *self.member.write() = Some(member.clone());
        tracing::info!(queue = %self.group, topic = %self.topic, "joined the queue's share group");
        Ok(member)
    }

    /// Sets the group's `share.auto.offset.reset=earliest` unless it is already.
    async fn start_at_beginning(&self) -> Result<(), ShareError> {
        let clients = self.clients.clone();
        let group = self.group.clone();
        tokio::task::spawn_blocking(move || clients.catalog.start_group_at_beginning(&group))
            .await
            .map_err(|_| ShareError::Closed)?
            .map_err(|e| ShareError::Unreachable(e.to_string()))
    }

    async fn flush(&self) {
        let member = self.member.read().clone();
        if let Some((_, m)) = member {
            if let Err(e) = m.flush().await {
                tracing::debug!(queue = %self.group, error = %e, "sending settlements failed");
            }
        }
    }

    /// Leaves the group: what the member still held goes back to it.
    async fn leave(&self) {
        let member = self.member.write().take();
        if let Some((_, m)) = member {
            match Arc::try_unwrap(m) {
                Ok(m) => {
                    if let Err(e) = m.close().await {
                        tracing::debug!(queue = %self.group, error = %e, "leaving the share group");
                    }
                }
                // Someone settles right now: dropping it lets the locks expire instead.
                Err(m) => drop(m),
            }
            tracing::info!(queue = %self.group, "left the queue's share group (no consumer here)");
        }
    }
}

impl RemoteQueue for KafkaQueue {
    fn subscribe(&self, sink: Arc<dyn QueueSink>, prefetch: usize) -> ConsumerId {
        let id = self.dispatch.lock().subscribe(sink, prefetch);
        self.ensure_running();
        self.wake.notify_one();
        id
    }

    fn unsubscribe(&self, consumer: ConsumerId) {
        let held = self.dispatch.lock().unsubscribe(consumer);
        self.acknowledge(&held, AckKind::Release);
    }

    fn settle(&self, consumer: ConsumerId, tag: i64, cumulative: bool, how: Settlement) -> bool {
        let Some(held) = self.dispatch.lock().settle(consumer, tag, cumulative) else {
            return false;
        };
        let kind = match how {
            Settlement::Accept => AckKind::Accept,
            Settlement::Release => AckKind::Release,
            Settlement::Reject => AckKind::Reject,
        };
        self.acknowledge(&held, kind);
        true
    }

    fn accept_many(&self, consumer: ConsumerId, tags: &[i64]) {
        let held = self.dispatch.lock().settle_many(consumer, tags);
        self.acknowledge(&held, AckKind::Accept);
    }

    fn stats(&self) -> QueueStats {
        self.dispatch.lock().stats()
    }
}
