//! SEND: to a topic or queue it becomes a record appended to the log (consecutive SENDs to
//! the same place are appended as one batch by the connection loop); to a temp queue it
//! goes straight to the owner's connection. A `reply-to:/temp-queue/NAME` creates the
//! sender's temp queue and is rewritten to `/reply-queue/<id>`.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use nagare_core::log::batch::NewRecord;
use nagare_core::queues::Queue;
use nagare_core::{AckLevel, Partition};
use parking_lot::RwLock;

use crate::dest::Dest;
use crate::error::StompError;
use crate::frame::Frame;
use crate::handlers::required;
use crate::message::{MessageHead, KEY_HEADER, SEND_ONLY};
use crate::session::Session;
use crate::temp::TempTarget;

/// Where records are appended.
pub(crate) enum Target {
    Queue(Arc<Queue>),
    Partition(Arc<Partition>),
}

impl Target {
    fn same_as(&self, other: &Target) -> bool {
        match (self, other) {
            (Target::Queue(a), Target::Queue(b)) => Arc::ptr_eq(a, b),
            (Target::Partition(a), Target::Partition(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// Records waiting to be appended, with the receipts owed once they are.
pub(crate) struct Append {
    pub target: Target,
    pub records: Vec<NewRecord>,
    pub durable: bool,
    pub receipts: Vec<String>,
}

impl Append {
    /// Adds `other` if it goes to the same place; gives it back otherwise.
    pub fn merge(&mut self, other: Append) -> Option<Append> {
        if !self.target.same_as(&other.target) {
            return Some(other);
        }
        self.records.extend(other.records);
        self.durable |= other.durable;
        self.receipts.extend(other.receipts);
        None
    }

    /// Appends; a receipt to a queue waits until the records are durable.
    pub async fn run(&self) -> Result<(), StompError> {
        match &self.target {
            Target::Queue(q) => {
                let ack = if self.durable {
                    AckLevel::Durable
                } else {
                    AckLevel::Leader
                };
                q.publish(&self.records, ack).await?;
            }
            Target::Partition(p) => {
                p.append_records(&self.records, AckLevel::Leader).await?;
            }
        }
        Ok(())
    }
}

impl Session {
    /// Handles a SEND up to the append: temp-queue messages are delivered here and
    /// `None` is returned; log destinations return what to append.
    pub(crate) async fn prepare_send(
        &mut self,
        frame: Frame,
    ) -> Result<Option<Append>, StompError> {
        let dest_str = required(&frame, "destination")?;
        let dest = Dest::parse(dest_str)?;
        let mut headers = frame.headers;
        self.rewrite_reply_to(&mut headers);
        let receipt = first(&headers, "receipt").map(str::to_string);
        match dest {
            Dest::TempQueue(name) => {
                let id = self.ensure_temp(&name);
                if let Some(t) = self.shared.temp.get(&id) {
                    self.deliver_temp(&t, &headers, &frame.body).await;
                }
                Ok(None)
            }
            Dest::ReplyQueue(id) => {
                match self.shared.temp.get(&id) {
                    Some(t) => self.deliver_temp(&t, &headers, &frame.body).await,
                    None => tracing::debug!(id, "reply to a temp queue that no longer exists"),
                }
                Ok(None)
            }
            Dest::Queue(name) => {
                let queue = self.shared.queues.queue(&name)?;
                Ok(Some(Append {
                    target: Target::Queue(queue),
                    records: vec![to_record(&headers, frame.body)],
                    durable: receipt.is_some(),
                    receipts: receipt.into_iter().collect(),
                }))
            }
            Dest::Topic(name) => {
                let topic = self.shared.broker.topic_or_create(&name)?;
                let n = topic.partition_count().max(1) as u64;
                let index = match first(&headers, KEY_HEADER) {
                    Some(k) => fnv1a(k.as_bytes()) % n,
                    None => self.next_message_id() % n,
                };
                let partition = topic.partition(index as i32)?;
                Ok(Some(Append {
                    target: Target::Partition(partition),
                    records: vec![to_record(&headers, frame.body)],
                    durable: false,
                    receipts: receipt.into_iter().collect(),
                }))
            }
        }
    }

    /// `reply-to:/temp-queue/NAME` becomes `/reply-queue/<id>` of this connection's temp
    /// queue NAME (created on first use), as RabbitMQ does.
    fn rewrite_reply_to(&mut self, headers: &mut [(String, String)]) {
        let Some(i) = headers.iter().position(|(k, _)| k == "reply-to") else {
            return;
        };
        let Some(name) = headers[i].1.strip_prefix("/temp-queue/") else {
            return;
        };
        if name.is_empty() {
            return;
        }
        let name = name.to_string();
        let id = self.ensure_temp(&name);
        headers[i].1 = format!("/reply-queue/{id}");
    }

    /// The registry id of this connection's temp queue NAME, creating it if needed.
    pub(crate) fn ensure_temp(&mut self, name: &str) -> String {
        if let Some(id) = self.temps.get(name) {
            return id.clone();
        }
        let id = format!(
            "tmp.{}.{}.{:08x}",
            self.id(),
            self.temps.len(),
            fnv1a(name.as_bytes()) as u32
                ^ (self.next_message_id() as u32).wrapping_mul(0x9e37_79b9)
        );
        let head = MessageHead {
            version: self.version,
            destination: format!("/reply-queue/{id}"),
            subscription: format!("/temp-queue/{name}"),
            ack_header: false,
        };
        self.shared.temp.insert(
            id.clone(),
            Arc::new(TempTarget {
                out: self.out.clone(),
                head: RwLock::new(head),
            }),
        );
        self.temps.insert(name.to_string(), id.clone());
        id
    }

    async fn deliver_temp(&self, target: &TempTarget, headers: &[(String, String)], body: &Bytes) {
        let mut buf = BytesMut::with_capacity(256 + body.len());
        let id = format!("t-{}", self.next_message_id());
        target
            .head
            .read()
            .encode_frame(&mut buf, &id, headers, body);
        // Waits only if the owner's outbound budget is full (backpressure on this sender).
        target.out.send(buf.freeze()).await;
    }
}

fn first<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A SEND as a record: body -> value, `key` -> key, other headers -> record headers.
fn to_record(headers: &[(String, String)], body: Bytes) -> NewRecord {
    let mut key = None;
    let mut out = Vec::with_capacity(headers.len());
    for (k, v) in headers {
        if SEND_ONLY.contains(&k.as_str()) {
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
        out.push((k.clone(), Some(Bytes::copy_from_slice(v.as_bytes()))));
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

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
