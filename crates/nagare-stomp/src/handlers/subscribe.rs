//! SUBSCRIBE: `id` unique per connection (1.0 may omit it: the destination is the id),
//! `ack` mode, `prefetch-count` for queues, `x-stream-offset` for topics.

use std::sync::Arc;

use crate::dest::Dest;
use crate::error::StompError;
use crate::frame::{Frame, Version};
use crate::handlers::required;
use crate::message::MessageHead;
use crate::queue_sub::StompQueueSink;
use crate::session::{AckMode, Session, SubKind, Subscription};
use crate::topic_sub::{self, StartAt};

impl Session {
    pub(crate) async fn on_subscribe(&mut self, frame: &Frame) -> Result<(), StompError> {
        let dest_str = required(frame, "destination")?;
        let dest = Dest::parse(dest_str)?;
        let id = match (frame.header("id"), self.version) {
            (Some(id), _) => id.to_string(),
            (None, Version::V1_0) => dest_str.to_string(),
            (None, _) => return Err(StompError::missing("id", "SUBSCRIBE")),
        };
        if self.subs.contains_key(&id) {
            return Err(StompError::protocol(format!(
                "subscription id {id:?} is already in use on this connection"
            )));
        }
        let ack = AckMode::parse(frame.header("ack"))
            .ok_or_else(|| StompError::protocol("ack must be auto, client or client-individual"))?;
        let num = self.next_sub;
        self.next_sub += 1;
        let head = MessageHead {
            version: self.version,
            destination: dest_str.to_string(),
            subscription: id.clone(),
            ack_header: self.version == Version::V1_2 && ack != AckMode::Auto,
        };
        let kind = match &dest {
            Dest::Topic(name) => {
                let start = StartAt::parse(frame.header("x-stream-offset")).ok_or_else(|| {
                    StompError::protocol("x-stream-offset must be first, last, next or an offset")
                })?;
                let topic = self.shared.broker.topic_or_create(name)?;
                let tasks = topic
                    .partitions()
                    .into_iter()
                    .map(|p| topic_sub::spawn(p, start, self.out.clone(), head.clone()))
                    .collect();
                SubKind::Topic(tasks)
            }
            Dest::Queue(name) => {
                let queue = self.shared.queues.queue(name)?;
                let prefetch = self.prefetch(frame)?;
                let sink = Arc::new(StompQueueSink {
                    out: self.out.clone(),
                    head,
                    sub_num: num,
                    auto_ack: (ack == AckMode::Auto).then(|| queue.clone()),
                });
                let consumer = queue.subscribe(sink, prefetch);
                SubKind::Queue { queue, consumer }
            }
            Dest::TempQueue(name) => {
                // ActiveMQ style: the owner subscribes to its temp queue explicitly; its
                // messages then carry this subscription's id.
                let tid = self.ensure_temp(name);
                if let Some(t) = self.shared.temp.get(&tid) {
                    let mut h = t.head.write();
                    h.subscription = id.clone();
                    h.destination = dest_str.to_string();
                }
                SubKind::Temp { name: name.clone() }
            }
            Dest::ReplyQueue(_) => {
                return Err(StompError::protocol(
                    "reply queues can be sent to, not subscribed to",
                ))
            }
        };
        self.sub_ids.insert(num, id.clone());
        self.subs.insert(
            id,
            Subscription {
                num,
                dest,
                ack,
                kind,
            },
        );
        self.receipt_for(frame).await;
        Ok(())
    }

    fn prefetch(&self, frame: &Frame) -> Result<usize, StompError> {
        let cfg = &self.shared.config;
        let raw = frame
            .header("prefetch-count")
            .or_else(|| frame.header("activemq.prefetchSize"));
        let n = match raw {
            None => cfg.default_prefetch,
            Some(v) => v
                .trim()
                .parse::<usize>()
                .map_err(|_| StompError::protocol(format!("invalid prefetch-count {v:?}")))?,
        };
        // 0 ("unlimited" to RabbitMQ) still gets a bound.
        Ok(if n == 0 {
            cfg.max_prefetch
        } else {
            n.min(cfg.max_prefetch)
        }
        .max(1))
    }
}
