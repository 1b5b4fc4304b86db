//! How a gateway hands a queue's messages to its own consumers of the queue: the records
//! its share-group member acquired go round robin to the consumers with room (never
//! more in flight per consumer than its prefetch), each under a tag of the gateway's
//! (what the consumer's ACK names), and ACK/NACK settle them by tag, cumulatively for
//! `client` mode. No I/O here: the queue ([`crate::queue`]) acknowledges what comes out.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use nagare_core::queues::{ConsumerId, Delivery, QueueSink, QueueStats};
use nagare_share_client::ShareRecord;

/// A message acquired by the member, as the cluster knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    /// Which member acquired it (a new member cannot settle an old one's records).
    pub member: u64,
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
}

struct Consumer {
    id: ConsumerId,
    sink: Arc<dyn QueueSink>,
    prefetch: usize,
    /// Tags delivered and not settled, in delivery order.
    tags: VecDeque<i64>,
}

#[derive(Default)]
pub(crate) struct Dispatch {
    consumers: Vec<Consumer>,
    in_flight: HashMap<i64, Held>,
    turn: usize,
    next_consumer: ConsumerId,
    next_tag: i64,
    redeliveries: u64,
}

/// What a dispatch round leaves to do with the cluster.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Settled at once (auto-ack consumers): ACCEPT.
    pub accepted: Vec<Held>,
    /// No consumer had room (one left meanwhile): RELEASE.
    pub unplaced: Vec<Held>,
}

impl Dispatch {
    /// Room for more messages over every consumer.
    pub(crate) fn credit(&self) -> usize {
        self.consumers
            .iter()
            .map(|c| c.prefetch.saturating_sub(c.tags.len()))
            .sum()
    }

    pub(crate) fn has_consumers(&self) -> bool {
        !self.consumers.is_empty()
    }

    pub(crate) fn subscribe(&mut self, sink: Arc<dyn QueueSink>, prefetch: usize) -> ConsumerId {
        self.next_consumer += 1;
        let id = self.next_consumer;
        self.consumers.push(Consumer {
            id,
            sink,
            prefetch: prefetch.max(1),
            tags: VecDeque::new(),
        });
        id
    }

    /// Removes a consumer; returns its unsettled messages (to release).
    pub(crate) fn unsubscribe(&mut self, consumer: ConsumerId) -> Vec<Held> {
        let Some(i) = self.consumers.iter().position(|c| c.id == consumer) else {
            return Vec::new();
        };
        let c = self.consumers.remove(i);
        c.tags
            .iter()
            .filter_map(|t| self.in_flight.remove(t))
            .collect()
    }

    /// Settles `tag` (with `cumulative`, every earlier one of the consumer too); `None`
    /// if it is not in flight for this consumer.
    pub(crate) fn settle(
        &mut self,
        consumer: ConsumerId,
        tag: i64,
        cumulative: bool,
    ) -> Option<Vec<Held>> {
        let c = self.consumers.iter_mut().find(|c| c.id == consumer)?;
        let pos = c.tags.iter().position(|&t| t == tag)?;
        let tags: Vec<i64> = if cumulative {
            c.tags.drain(..=pos).collect()
        } else {
            c.tags.remove(pos).into_iter().collect()
        };
        Some(
            tags.iter()
                .filter_map(|t| self.in_flight.remove(t))
                .collect(),
        )
    }

    /// Settles many single messages of one consumer (auto-ack after writing).
    pub(crate) fn settle_many(&mut self, consumer: ConsumerId, tags: &[i64]) -> Vec<Held> {
        if let Some(c) = self.consumers.iter_mut().find(|c| c.id == consumer) {
            c.tags.retain(|t| !tags.contains(t));
        }
        tags.iter()
            .filter_map(|t| self.in_flight.remove(t))
            .collect()
    }

    /// Hands acquired records to the consumers with room, round robin; each consumer
    /// gets its share in one call of its sink.
    pub(crate) fn dispatch(&mut self, member: u64, records: Vec<ShareRecord>) -> Outcome {
        let mut out = Outcome::default();
        let n = self.consumers.len();
        let mut rounds: Vec<Vec<Delivery>> = (0..n).map(|_| Vec::new()).collect();
        for r in records {
            let held = Held {
                member,
                topic: r.topic.clone(),
                partition: r.partition,
                offset: r.offset,
            };
            let room = (0..n)
                .map(|i| (self.turn + i) % n.max(1))
                .find(|&i| self.consumers[i].tags.len() < self.consumers[i].prefetch);
            let Some(k) = room else {
                out.unplaced.push(held);
                continue;
            };
            self.turn = (k + 1) % n;
            self.next_tag += 1;
            let tag = self.next_tag;
            let redelivered = r.delivery_count > 1;
            if redelivered {
                self.redeliveries += 1;
            }
            let c = &mut self.consumers[k];
            c.tags.push_back(tag);
            self.in_flight.insert(tag, held);
            rounds[k].push(Delivery {
                consumer: c.id,
                offset: tag,
                record: Arc::new(r.record),
                redelivered,
                delivery_count: r.delivery_count.max(1),
            });
        }
        for (k, batch) in rounds.into_iter().enumerate() {
            if batch.is_empty() {
                continue;
            }
            let count = batch.len();
            let c = &mut self.consumers[k];
            if c.sink.deliver(batch) {
                // Written and done (auto-ack): the last `count` delivered to it.
                let from = c.tags.len() - count;
                let done: Vec<i64> = c.tags.drain(from..).collect();
                out.accepted
                    .extend(done.iter().filter_map(|t| self.in_flight.remove(t)));
            }
        }
        out
    }

    pub(crate) fn stats(&self) -> QueueStats {
        QueueStats {
            // The cluster keeps the queue; a gateway sees only what it holds.
            depth: 0,
            unacked: self.in_flight.len() as u64,
            consumers: self.consumers.len() as u64,
            redeliveries: self.redeliveries,
        }
    }
}

#[cfg(test)]
mod tests {
    use nagare_core::log::batch::Record;
    use parking_lot::Mutex;

    use super::*;

    #[derive(Default)]
    struct Sink {
        got: Mutex<Vec<(i64, i64, bool)>>,
        auto: bool,
    }

    impl QueueSink for Sink {
        fn deliver(&self, d: Vec<Delivery>) -> bool {
            self.got
                .lock()
                .extend(d.iter().map(|d| (d.offset, d.record.offset, d.redelivered)));
            self.auto
        }
    }

    fn rec(offset: i64, delivery_count: i16) -> ShareRecord {
        ShareRecord {
            topic: "queue.q".into(),
            partition: 0,
            offset,
            delivery_count,
            record: Record {
                offset,
                timestamp: 0,
                key: None,
                value: None,
                headers: vec![],
            },
        }
    }

    #[test]
    fn round_robin_within_prefetch_and_the_rest_released() {
        let mut d = Dispatch::default();
        let a = Arc::new(Sink::default());
        let b = Arc::new(Sink::default());
        let ca = d.subscribe(a.clone(), 2);
        let cb = d.subscribe(b.clone(), 1);
        assert_eq!(d.credit(), 3);
        let out = d.dispatch(1, (0..5).map(|o| rec(o, 1)).collect());
        assert_eq!(a.got.lock().iter().map(|g| g.1).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(b.got.lock().iter().map(|g| g.1).collect::<Vec<_>>(), [1]);
        assert_eq!(
            out.unplaced.iter().map(|h| h.offset).collect::<Vec<_>>(),
            [3, 4]
        );
        assert_eq!(d.credit(), 0);
        // ACK by tag; a tag of another consumer is not this one's.
        let tag_a0 = a.got.lock()[0].0;
        assert!(d.settle(cb, tag_a0, false).is_none());
        assert_eq!(d.settle(ca, tag_a0, false).unwrap()[0].offset, 0);
        assert_eq!(d.credit(), 1);
        assert_eq!(d.stats().unacked, 2);
    }

    #[test]
    fn cumulative_settles_earlier_ones_and_leaving_releases_the_rest() {
        let mut d = Dispatch::default();
        let a = Arc::new(Sink::default());
        let ca = d.subscribe(a.clone(), 10);
        d.dispatch(
            7,
            (0..4).map(|o| rec(o, if o == 3 { 2 } else { 1 })).collect(),
        );
        let tags: Vec<i64> = a.got.lock().iter().map(|g| g.0).collect();
        let settled = d.settle(ca, tags[1], true).unwrap();
        assert_eq!(settled.iter().map(|h| h.offset).collect::<Vec<_>>(), [0, 1]);
        assert!(a.got.lock()[3].2, "delivery count 2 is a redelivery");
        assert_eq!(d.stats().redeliveries, 1);
        let left = d.unsubscribe(ca);
        assert_eq!(
            left.iter()
                .map(|h| (h.member, h.offset))
                .collect::<Vec<_>>(),
            [(7, 2), (7, 3)]
        );
        assert!(!d.has_consumers());
    }

    #[test]
    fn auto_ack_consumers_settle_on_delivery() {
        let mut d = Dispatch::default();
        let a = Arc::new(Sink {
            auto: true,
            ..Sink::default()
        });
        d.subscribe(a, 2);
        let out = d.dispatch(1, vec![rec(0, 1), rec(1, 1)]);
        assert_eq!(out.accepted.len(), 2);
        assert_eq!(d.credit(), 2);
        assert_eq!(d.stats().unacked, 0);
    }
}
