//! SEND: to a topic or queue it becomes a record appended to the log (consecutive SENDs to
//! the same place are appended as one batch by the connection loop); to a temp queue it
//! goes straight to the owner's connection. A `reply-to:/temp-queue/NAME` creates the
//! sender's temp queue and is rewritten to `/reply-queue/<id>`.
//!
//! In cluster mode a reply may be addressed to a temp queue another gateway owns (its
//! requester connected there): the core's reply router says so from the id, and the
//! reply is sent through the cluster like an append, its receipt waiting for the
//! cluster's acknowledgement.

use nagare_core::log::now_ms;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use nagare_core::log::batch::NewRecord;
use nagare_core::queues::Queue;
use nagare_core::security::Operation;
use nagare_core::store::{Reply, ReplyRouter};
use nagare_core::{AckLevel, CoreError, Partition};

use crate::command::Send;
use crate::dest::Dest;
use crate::error::StompError;
use crate::headers::Headers;
use crate::message::{MessageHead, MessageId, KEY_HEADER, SEND_ONLY};
use crate::session::Session;
use crate::temp::TempTarget;

/// Where records are appended.
pub(crate) enum Target {
    Queue(Arc<Queue>),
    Partition(Arc<Partition>),
    /// Replies to temp queues of other gateways (cluster mode), through the router.
    Reply(Arc<dyn ReplyRouter>),
}

impl Target {
    fn same_as(&self, other: &Target) -> bool {
        match (self, other) {
            (Target::Queue(a), Target::Queue(b)) => Arc::ptr_eq(a, b),
            (Target::Partition(a), Target::Partition(b)) => Arc::ptr_eq(a, b),
            (Target::Reply(a), Target::Reply(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    fn partition(&self) -> Option<&Arc<Partition>> {
        match self {
            Target::Queue(q) => Some(q.partition()),
            Target::Partition(p) => Some(p),
            Target::Reply(_) => None,
        }
    }
}

/// Size of the chunks replies to temp queues are encoded into.
const SCRATCH_BYTES: usize = 16 * 1024;

/// Bytes of a record batch's header.
const BATCH_OVERHEAD: usize = 61;

/// The most bytes `r` can take inside a batch: every varint counted at its widest.
fn record_bound(r: &NewRecord) -> usize {
    40 + r.key.as_ref().map_or(0, |k| k.len())
        + r.value.as_ref().map_or(0, |v| v.len())
        + r.headers
            .iter()
            .map(|(k, v)| 10 + k.len() + v.as_ref().map_or(0, |v| v.len()))
            .sum::<usize>()
}

/// Records waiting to be appended, with the receipts owed once they are.
pub(crate) struct Append {
    pub target: Target,
    pub records: Vec<NewRecord>,
    /// For [`Target::Reply`]: the replies, which travel as they were sent.
    replies: Vec<Reply>,
    pub durable: bool,
    pub receipts: Vec<String>,
    /// Upper bound of the batch's size: SENDs are merged only while it stays within the
    /// topic's `max.message.bytes`, so only a single SEND can ever be too large.
    bound: usize,
}

impl Append {
    fn new(target: Target, record: NewRecord, durable: bool, receipt: Option<String>) -> Append {
        Append {
            bound: BATCH_OVERHEAD + record_bound(&record),
            target,
            records: vec![record],
            replies: Vec::new(),
            durable,
            receipts: receipt.into_iter().collect(),
        }
    }

    fn reply(router: Arc<dyn ReplyRouter>, reply: Reply, receipt: Option<String>) -> Append {
        Append {
            bound: 0,
            target: Target::Reply(router),
            records: Vec::new(),
            replies: vec![reply],
            durable: false,
            receipts: receipt.into_iter().collect(),
        }
    }

    /// Adds `other` if it goes to the same place and the batch stays within the record
    /// limit; gives it back otherwise.
    pub(crate) fn merge(&mut self, other: Append) -> Option<Append> {
        if !self.target.same_as(&other.target) {
            return Some(other);
        }
        if let Some(p) = self.target.partition() {
            let bound = self.bound + other.bound - BATCH_OVERHEAD;
            if bound > p.max_message_bytes() as usize {
                return Some(other);
            }
            self.bound = bound;
        }
        self.records.extend(other.records);
        self.replies.extend(other.replies);
        self.durable |= other.durable;
        self.receipts.extend(other.receipts);
        None
    }

    /// Appends; a receipt to a queue waits until the records are durable. The records
    /// are handed over (a queue keeps them for its consumers without a copy).
    pub(crate) async fn run(&mut self) -> Result<(), StompError> {
        // For the error about a batch too large, which no longer has the records.
        let body: usize = self
            .records
            .iter()
            .map(|r| r.value.as_ref().map_or(0, |v| v.len()))
            .sum();
        let res = match &self.target {
            Target::Queue(q) => {
                let ack = if self.durable {
                    AckLevel::Durable
                } else {
                    AckLevel::Leader
                };
                q.publish_owned(std::mem::take(&mut self.records), ack)
                    .await
            }
            Target::Partition(p) => p.append_records(&self.records, AckLevel::Leader).await,
            Target::Reply(router) => {
                router
                    .send(&self.replies)
                    .await
                    .map(|()| nagare_core::log::AppendInfo {
                        base_offset: -1,
                        last_offset: -1,
                        max_timestamp: -1,
                        record_count: 0,
                    })
            }
        };
        match res {
            Ok(_) => Ok(()),
            Err(CoreError::MessageTooLarge { size, limit }) => Err(StompError::TooLarge {
                body,
                size,
                limit,
                topic: self
                    .target
                    .partition()
                    .map_or_else(String::new, |p| p.topic().to_string()),
            }),
            Err(e) => Err(e.into()),
        }
    }
}

impl Session {
    /// Handles a SEND up to the append: temp-queue messages are delivered here and
    /// `None` is returned; log destinations return what to append, which then owes the
    /// `receipt` (taken out of the caller's hands only then: on `None` or an error the
    /// caller still answers it).
    pub(crate) fn prepare_send(
        &mut self,
        send: Send,
        receipt: &mut Option<String>,
    ) -> Result<Option<Append>, StompError> {
        let Send {
            dest,
            mut headers,
            body,
            ..
        } = send;
        self.access.authorize(Operation::Write, &dest)?;
        self.rewrite_reply_to(&mut headers);
        match dest {
            Dest::TempQueue(name) => {
                let id = self.ensure_temp(&name);
                if let Some(t) = self.shared.temp.get(&id) {
                    self.deliver_temp(&t, &headers, &body);
                }
                Ok(None)
            }
            Dest::ReplyQueue(id) => {
                if let Some(t) = self.shared.temp.get(&id) {
                    self.deliver_temp(&t, &headers, &body);
                    return Ok(None);
                }
                // Cluster mode: the temp queue may be another gateway's.
                if let Some(router) = &self.shared.replies {
                    if router.is_elsewhere(&id) {
                        let reply = Reply {
                            to: id,
                            headers: reply_headers(&headers),
                            body,
                        };
                        return Ok(Some(Append::reply(router.clone(), reply, receipt.take())));
                    }
                }
                tracing::debug!(id, "reply to a temp queue that no longer exists");
                Ok(None)
            }
            Dest::Queue(name) => {
                let queue = self.queue_named(&name)?;
                let durable = receipt.is_some();
                let record = to_record(&headers, body);
                Ok(Some(Append::new(
                    Target::Queue(queue),
                    record,
                    durable,
                    receipt.take(),
                )))
            }
            Dest::Topic(name) => {
                let topic = self.shared.broker.topic_or_create(&name)?;
                let n = topic.partition_count().max(1) as u64;
                let index = match first(&headers, KEY_HEADER) {
                    Some(k) => fnv1a(k.as_bytes()) % n,
                    None => self.next_message_id() % n,
                };
                let partition = topic.partition(index as i32)?;
                let record = to_record(&headers, body);
                Ok(Some(Append::new(
                    Target::Partition(partition),
                    record,
                    false,
                    receipt.take(),
                )))
            }
        }
    }

    /// The queue `name`, the last one this connection sent to kept at hand: an RPC client
    /// sends every request to the same queue, and the lookup formats the topic name and
    /// takes the registry's lock. Keeping it changes nothing: a STOMP queue, once
    /// opened, stays the registry's answer for its name for the broker's life (only
    /// share-group queues, under other keys, are ever dropped from it).
    fn queue_named(&mut self, name: &str) -> Result<Arc<Queue>, StompError> {
        if let Some((last, q)) = &self.last_queue {
            if last == name {
                return Ok(q.clone());
            }
        }
        let q = self.shared.queues.queue(name)?;
        self.last_queue = Some((name.to_string(), q.clone()));
        Ok(q)
    }

    /// `reply-to:/temp-queue/NAME` becomes `/reply-queue/<id>` of this connection's temp
    /// queue NAME (created on first use), as RabbitMQ does.
    fn rewrite_reply_to(&mut self, headers: &mut Headers) {
        let Some(i) = headers.position("reply-to") else {
            return;
        };
        let Some(name) = headers
            .value(i)
            .and_then(|v| v.strip_prefix("/temp-queue/"))
        else {
            return;
        };
        if name.is_empty() {
            return;
        }
        // Every request of an RPC client names the same temp queue: its rewritten form
        // is kept rather than formatted per SEND.
        if let Some(dest) = self.reply_dests.get(name) {
            headers.set_value(i, dest);
            return;
        }
        let name = name.to_string();
        self.ensure_temp(&name);
        if let Some(dest) = self.reply_dests.get(&name) {
            headers.set_value(i, dest);
        }
    }

    /// The registry id of this connection's temp queue NAME, creating it if needed.
    pub(crate) fn ensure_temp(&mut self, name: &str) -> String {
        if let Some(id) = self.temps.get(name) {
            return id.clone();
        }
        // Random bits: replying to a temp queue needs no ACL, knowing its id is the
        // permission (see `crate::access`), so the id must not be guessable. In cluster
        // mode the prefix names this gateway, so a reply sent to another finds its way.
        let id = format!(
            "{}tmp.{}.{}.{:016x}",
            self.shared.temp_prefix,
            self.id(),
            self.temps.len(),
            rand::random::<u64>()
        );
        let head = MessageHead::new(
            self.version,
            format!("/reply-queue/{id}"),
            &format!("/temp-queue/{name}"),
            false,
        );
        self.shared.temp.insert(
            id.clone(),
            Arc::new(TempTarget::new(
                self.out.clone(),
                head,
                self.shared.config.temp_queue_max_bytes,
            )),
        );
        self.temps.insert(name.to_string(), id.clone());
        self.reply_dests
            .insert(name.to_string(), format!("/reply-queue/{id}"));
        id
    }

    fn deliver_temp(&mut self, target: &TempTarget, headers: &Headers, body: &Bytes) {
        // Encoded into the session's scratch buffer: `split` hands out its front without
        // a new allocation while the buffer has room (a responder sends a reply per
        // request, most of them gathered and copied into one write right away, which
        // frees their part of the buffer for reuse).
        if self.scratch.capacity() == 0 {
            // Replies are reserved from chunks of this size (a `BytesMut` grows a shared
            // buffer back to its first capacity).
            self.scratch = BytesMut::with_capacity(SCRATCH_BYTES);
        }
        self.scratch.reserve(256 + body.len());
        let id = MessageId::temp(self.next_message_id());
        target
            .head
            .read()
            .encode_frame(&mut self.scratch, id.as_str(), headers.iter(), body);
        let frame = self.scratch.split().freeze();
        target.deliver(frame);
    }
}

/// The headers of a reply as they travel to another gateway: what the owner's MESSAGE
/// shows (a SEND's own headers stay behind, as for a local temp queue).
fn reply_headers(headers: &Headers) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(k, _)| !SEND_ONLY.contains(k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn first<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers.get(name)
}

/// A SEND as a record: body -> value, `key` -> key, other headers -> record headers.
fn to_record(headers: &Headers, body: Bytes) -> NewRecord {
    let mut key = None;
    let mut out = Vec::with_capacity(headers.len());
    for (k, v) in headers.iter() {
        if SEND_ONLY.contains(&k) {
            continue;
        }
        if k == KEY_HEADER {
            if key.is_none() {
                key = Some(Bytes::copy_from_slice(v.as_bytes()));
            }
            continue;
        }
        if out
            .iter()
            .any(|(seen, _): &(String, Option<Bytes>)| seen == k)
        {
            continue; // the first of a repeated header wins
        }
        out.push((k.to_string(), Some(Bytes::copy_from_slice(v.as_bytes()))));
    }
    NewRecord {
        key,
        value: Some(body),
        headers: out,
        timestamp: now_ms(),
    }
}

fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nagare_core::log::batch::build_batch;

    #[test]
    fn record_bound_is_never_below_the_encoded_size() {
        let records = [
            NewRecord::default(),
            NewRecord {
                key: Some(Bytes::from_static(b"k")),
                value: Some(Bytes::from(vec![7u8; 300_000])),
                headers: vec![("h".into(), Some(Bytes::from(vec![1u8; 200])))],
                timestamp: i64::MAX,
            },
            to_record(
                &[
                    ("destination", "/queue/q".to_string()),
                    ("a", "b".repeat(1000)),
                    (KEY_HEADER, "key".to_string()),
                ]
                .into_iter()
                .collect(),
                Bytes::from_static(b"body"),
            ),
        ];
        for r in &records {
            let one = build_batch(std::slice::from_ref(r)).len();
            assert!(one <= BATCH_OVERHEAD + record_bound(r), "{one}");
        }
        let all = build_batch(&records).len();
        let bound: usize = records.iter().map(record_bound).sum();
        assert!(all <= BATCH_OVERHEAD + bound);
    }
}
