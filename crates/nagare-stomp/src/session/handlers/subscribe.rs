//! SUBSCRIBE: `id` unique per connection (1.0 may omit it: the destination is the id),
//! `ack` mode, `prefetch-count` for queues, `x-stream-offset` for topics.

use std::sync::Arc;

use nagare_core::security::Operation;

use crate::command::Subscribe;
use crate::dest::Dest;
use crate::error::StompError;
use crate::frame::Version;
use crate::message::MessageHead;
use crate::queue_sub::StompQueueSink;
use crate::session::{AckMode, Session, SubKind, Subscription};
use crate::topic_sub;

impl Session {
    pub(crate) async fn on_subscribe(&mut self, sub: Subscribe) -> Result<(), StompError> {
        let Subscribe {
            destination,
            dest,
            id,
            ack,
            start,
            prefetch,
        } = sub;
        self.access.authorize(Operation::Read, &dest)?;
        if self.subs.contains_key(&id) {
            return Err(StompError::protocol(format!(
                "subscription id {id:?} is already in use on this connection"
            )));
        }
        let num = self.next_sub;
        self.next_sub += 1;
        let head = MessageHead::new(
            self.version,
            destination.clone(),
            &id,
            self.version == Version::V1_2 && ack != AckMode::Auto,
        );
        let kind = match &dest {
            Dest::Topic(name) => {
                let topic = self.shared.broker.topic_or_create(name)?;
                let mut tasks = Vec::new();
                for p in topic.partitions() {
                    match topic_sub::spawn(p, start, self.out.clone(), head.clone()).await {
                        Ok(t) => tasks.push(t),
                        Err(e) => {
                            tasks
                                .iter()
                                .for_each(|t: &tokio::task::JoinHandle<()>| t.abort());
                            return Err(e.into());
                        }
                    }
                }
                SubKind::Topic(tasks)
            }
            Dest::Queue(name) => {
                let queue = self.shared.queues.queue(name)?;
                let prefetch = self.prefetch(prefetch);
                let sink = Arc::new(StompQueueSink {
                    out: self.out.clone(),
                    head,
                    sub_num: num,
                    auto_ack: (ack == AckMode::Auto).then(|| queue.clone()),
                    partition: Some(queue.partition().clone()),
                });
                let consumer = queue.subscribe(sink, prefetch);
                SubKind::Queue { queue, consumer }
            }
            Dest::TempQueue(name) => {
                // ActiveMQ style: the owner subscribes to its temp queue explicitly; its
                // messages then carry this subscription's id.
                let tid = self.ensure_temp(name);
                if let Some(t) = self.shared.temp.get(&tid) {
                    t.head.write().retarget(destination, &id);
                }
                SubKind::Temp { name: name.clone() }
            }
            // Refused by the parse step.
            Dest::ReplyQueue(_) => {
                return Err(StompError::protocol(
                    "reply queues can be sent to, not subscribed to",
                ))
            }
        };
        self.sub_ids.insert(num, id.clone());
        let sub = Subscription {
            num,
            dest,
            ack,
            kind,
        };
        crate::meters::subscription_started(&sub);
        self.subs.insert(id, sub);
        Ok(())
    }

    /// The prefetch a queue subscription gets: the default if none was asked for, and
    /// never more than the configured bound (0, "unlimited" to RabbitMQ, gets the bound).
    fn prefetch(&self, asked: Option<usize>) -> usize {
        let cfg = &self.shared.config;
        let n = asked.unwrap_or(cfg.default_prefetch);
        if n == 0 {
            cfg.max_prefetch
        } else {
            n.min(cfg.max_prefetch)
        }
        .max(1)
    }
}
