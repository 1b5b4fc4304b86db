//! Temp-queue RPC across gateways. A requester's temp queue lives in the memory of the
//! gateway it connected to; its id names that gateway ([`crate::reply_id`]). A reply a
//! responder sends on another gateway goes to the owner's reply topic
//! `__nagare_replies-<node id>` (one partition, ten minutes of retention, created by the
//! owner at start), keyed by the temp-queue id, the reply's headers as record headers
//! and its body as the value; the owner follows that topic from its end and hands each
//! reply to the temp queue, or drops it if the requester has left.
//!
//! What it costs: one produce (`acks=all`) and one fetch on the way, a few milliseconds
//! on a local network plus the producer's `linger.ms`, next to the in-memory hand-over a
//! reply gets when requester and responder share a gateway.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use nagare_core::log::batch::{NewRecord, Record};
use nagare_core::log::now_ms;
use nagare_core::store::{BoxFuture, Reply, ReplyInbox, ReplyRouter};
use nagare_core::CoreError;
use parking_lot::{Mutex, RwLock};

use crate::reply_id::{node_of, prefix, reply_topic};
use crate::tail::Follower;
use crate::Clients;

/// How long replies stay in a reply topic (they are read within milliseconds).
const RETENTION_MS: &str = "600000";

pub(crate) struct KafkaReplies {
    node: i32,
    prefix: String,
    clients: Arc<Clients>,
    inbox: RwLock<Option<Arc<dyn ReplyInbox>>>,
    /// Gateways whose reply topic exists (looked up once each).
    known: Mutex<HashSet<i32>>,
    /// Replies are handed to the inbox on the runtime, not the reader's thread.
    runtime: tokio::runtime::Handle,
}

impl KafkaReplies {
    pub(crate) fn new(clients: Arc<Clients>, runtime: tokio::runtime::Handle) -> Arc<KafkaReplies> {
        let node = clients.config.node_id;
        Arc::new(KafkaReplies {
            node,
            prefix: prefix(node),
            clients,
            inbox: RwLock::new(None),
            known: Mutex::new(HashSet::new()),
            runtime,
        })
    }

    /// Creates this gateway's reply topic if needed and follows it from its end.
    /// Blocking.
    pub(crate) fn start(self: &Arc<Self>) -> Result<(), CoreError> {
        let topic = reply_topic(self.node);
        let configs = [
            ("retention.ms".to_string(), RETENTION_MS.to_string()),
            ("cleanup.policy".to_string(), "delete".to_string()),
        ];
        match self.clients.catalog.create_topic(&topic, 1, &configs) {
            Ok(()) | Err(CoreError::TopicExists(_)) => {}
            Err(e) => return Err(e),
        }
        let (_, end) = self
            .clients
            .catalog
            .watermarks(&topic, 0)
            .map_err(|e| CoreError::Unavailable(e.to_string()))?;
        let me: Arc<dyn Follower> = self.clone();
        self.clients
            .tail
            .follow(&topic, 0, end, Arc::downgrade(&me))
            .map_err(|e| CoreError::Unavailable(e.to_string()))?;
        // The tail keeps a weak reference: the cluster keeps `self` alive.
        self.known.lock().insert(self.node);
        tracing::info!(
            topic,
            "replies to this gateway's temp queues arrive through its reply topic"
        );
        Ok(())
    }

    async fn send_now(&self, replies: &[Reply]) -> Result<(), CoreError> {
        let mut nodes: Vec<i32> = replies.iter().filter_map(|r| node_of(&r.to)).collect();
        nodes.sort_unstable();
        nodes.dedup();
        for node in nodes {
            let known = self.known.lock().contains(&node);
            let exists = if known {
                true
            } else {
                let me = self.clients.clone();
                let topic = reply_topic(node);
                let found = tokio::task::spawn_blocking(move || me.catalog.describe_topic(&topic))
                    .await
                    .map_err(|_| CoreError::ShuttingDown)??;
                if found.is_some() {
                    self.known.lock().insert(node);
                }
                found.is_some()
            };
            if !exists {
                // No such gateway ever started: its requesters are gone too.
                tracing::debug!(node, "reply to a gateway without a reply topic; dropped");
                continue;
            }
            let records: Vec<NewRecord> = replies
                .iter()
                .filter(|r| node_of(&r.to) == Some(node))
                .map(record_of)
                .collect();
            self.clients
                .producer
                .send(&reply_topic(node), Some(0), &records)
                .await?;
        }
        Ok(())
    }
}

fn record_of(reply: &Reply) -> NewRecord {
    NewRecord {
        key: Some(Bytes::copy_from_slice(reply.to.as_bytes())),
        value: Some(reply.body.clone()),
        headers: reply
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), Some(Bytes::copy_from_slice(v.as_bytes()))))
            .collect(),
        timestamp: now_ms(),
    }
}

/// A record of a reply topic as the reply it carries (`None` if it is not one).
fn reply_of(record: Record) -> Option<Reply> {
    let to = String::from_utf8(record.key?.to_vec()).ok()?;
    let headers = record
        .headers
        .into_iter()
        .map(|(k, v)| {
            let v = v.map_or_else(String::new, |v| String::from_utf8_lossy(&v).into_owned());
            (k, v)
        })
        .collect();
    Some(Reply {
        to,
        headers,
        body: record.value.unwrap_or_default(),
    })
}

impl ReplyRouter for KafkaReplies {
    fn id_prefix(&self) -> &str {
        &self.prefix
    }

    fn is_elsewhere(&self, id: &str) -> bool {
        node_of(id).is_some_and(|n| n != self.node)
    }

    fn send<'a>(&'a self, replies: &'a [Reply]) -> BoxFuture<'a, Result<(), CoreError>> {
        Box::pin(self.send_now(replies))
    }

    fn set_inbox(&self, inbox: Arc<dyn ReplyInbox>) {
        *self.inbox.write() = Some(inbox);
    }
}

impl Follower for KafkaReplies {
    fn push(&self, record: Record) {
        let Some(reply) = reply_of(record) else {
            return;
        };
        let Some(inbox) = self.inbox.read().clone() else {
            return;
        };
        self.runtime.spawn(async move { inbox.deliver(reply) });
    }

    fn publish(&self) {}

    fn wanted(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_travels_as_a_record_and_back() {
        let reply = Reply {
            to: "n2.tmp.1.0.ff".into(),
            headers: vec![
                ("correlation-id".into(), "7".into()),
                ("x".into(), "a".into()),
                ("x".into(), "b".into()),
            ],
            body: Bytes::from_static(b"answer"),
        };
        let r = record_of(&reply);
        let back = reply_of(Record {
            offset: 0,
            timestamp: r.timestamp,
            key: r.key,
            value: r.value,
            headers: r.headers,
        });
        assert_eq!(back, Some(reply));
        let keyless = Record {
            offset: 0,
            timestamp: 0,
            key: None,
            value: None,
            headers: vec![],
        };
        assert_eq!(reply_of(keyless), None);
    }
}
