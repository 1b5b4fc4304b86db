//! A subscription to `/queue/Q`: the queue's dispatcher hands it messages (never more
//! than its prefetch), which it encodes straight into its connection's writer.

use std::sync::Arc;

use bytes::BytesMut;
use nagare_core::queues::{Delivery, Queue, QueueSink};
use nagare_core::Partition;

use crate::message::{MessageHead, MessageId};
use crate::writer::ConnOut;

pub(crate) struct StompQueueSink {
    pub out: ConnOut,
    pub head: MessageHead,
    /// Number of the subscription within its connection (part of message ids).
    pub sub_num: u64,
    /// Set for ack mode `auto`: messages are acknowledged once written.
    pub auto_ack: Option<Arc<Queue>>,
    /// The queue's topic partition, which counts what is delivered from it.
    pub partition: Option<Arc<Partition>>,
}

impl QueueSink for StompQueueSink {
    fn deliver(&self, deliveries: Vec<Delivery>) -> bool {
        let size: usize = deliveries
            .iter()
            .map(|d| self.head.frame_size_estimate(MessageId::MAX_LEN, &d.record))
            .sum();
        let mut buf = BytesMut::with_capacity(size);
        let mut acks = Vec::new();
        for d in &deliveries {
            let id = MessageId::queue(self.out.id, self.sub_num, d.offset);
            self.head.encode_record(
                &mut buf,
                id.as_str(),
                Some(d.redelivered),
                Some(d.delivery_count),
                &d.record,
            );
            if let Some(q) = &self.auto_ack {
                acks.push((q.clone(), d.consumer, d.offset));
            }
        }
        if let Some(p) = &self.partition {
            p.count_out(deliveries.len() as u64, buf.len() as u64);
        }
        crate::meters::messages_sent("queue", deliveries.len());
        self.out.send_queue_messages(buf.freeze(), acks)
    }
}

/// The parts of a queue message id ([`MessageId::queue`]), if it is one of this
/// connection's.
pub(crate) fn parse_message_id(conn: u64, id: &str) -> Option<(u64, i64)> {
    let mut it = id.splitn(3, '-');
    let c: u64 = it.next()?.parse().ok()?;
    let s: u64 = it.next()?.parse().ok()?;
    let o: i64 = it.next()?.parse().ok()?;
    (c == conn).then_some((s, o))
}
