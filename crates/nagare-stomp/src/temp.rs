//! Temp queues (RPC over MQ): in memory only, owned by one connection, addressed by
//! others through the `/reply-queue/<id>` their `reply-to` was rewritten to. In cluster
//! mode replies from other gateways arrive through [`Inbox`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use bytes::{Bytes, BytesMut};
use nagare_core::store::{Reply, ReplyInbox};
use parking_lot::RwLock;
use tokio::sync::Semaphore;

use crate::message::{MessageHead, MessageId};
use crate::writer::ConnOut;

/// One temp queue: the owner's writer and how its messages are labelled (the
/// subscription changes when the owner SUBSCRIBEs to it explicitly).
pub(crate) struct TempTarget {
    pub out: ConnOut,
    pub head: RwLock<MessageHead>,
    /// Bytes of replies queued for the owner and not yet written.
    budget: Arc<Semaphore>,
    budget_max: usize,
    /// Set while replies are being dropped (one log line per overflow, not per reply).
    full: AtomicBool,
}

impl TempTarget {
    pub(crate) fn new(out: ConnOut, head: MessageHead, max_bytes: usize) -> TempTarget {
        let budget_max = max_bytes.clamp(1024, u32::MAX as usize / 2);
        TempTarget {
            out,
            head: RwLock::new(head),
            budget: Arc::new(Semaphore::new(budget_max)),
            budget_max,
            full: AtomicBool::new(false),
        }
    }

    /// Hands an encoded MESSAGE to the owner without ever waiting: when the owner has
    /// left `temp_queue_max_bytes` unread, the reply is dropped (logged and counted), as
    /// the sender is typically a responder serving many requesters.
    pub(crate) fn deliver(&self, frame: Bytes) {
        let n = frame.len().clamp(1, self.budget_max) as u32;
        match self.budget.clone().try_acquire_many_owned(n) {
            Ok(permit) => {
                self.full.store(false, Ordering::Relaxed);
                self.out.send_within(frame, permit);
            }
            Err(_) => {
                metrics::counter!(
                    "nagare_rejected_total",
                    "protocol" => "stomp",
                    "reason" => "temp_queue_full"
                )
                .increment(1);
                if !self.full.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        temp_queue = %self.head.read().destination(),
                        limit = self.budget_max,
                        "temp queue full (its owner is not reading): dropping replies to it"
                    );
                }
            }
        }
    }
}

#[derive(Default)]
pub(crate) struct TempQueues {
    map: RwLock<HashMap<String, Arc<TempTarget>>>,
}

impl TempQueues {
    pub(crate) fn insert(&self, id: String, target: Arc<TempTarget>) {
        if self.map.write().insert(id, target).is_none() {
            crate::meters::temp_queues(1.0);
        }
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<TempTarget>> {
        self.map.read().get(id).cloned()
    }

    pub(crate) fn remove(&self, id: &str) {
        if self.map.write().remove(id).is_some() {
            crate::meters::temp_queues(-1.0);
        }
    }
}

/// Where the core's reply router hands replies that other gateways sent to this
/// gateway's temp queues (cluster mode): delivered like a local reply, or dropped when
/// the temp queue is gone (its requester left).
pub(crate) struct Inbox {
    shared: Weak<crate::session::Shared>,
}

impl Inbox {
    pub(crate) fn new(shared: &Arc<crate::session::Shared>) -> Inbox {
        Inbox {
            shared: Arc::downgrade(shared),
        }
    }
}

impl ReplyInbox for Inbox {
    fn deliver(&self, reply: Reply) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let Some(target) = shared.temp.get(&reply.to) else {
            tracing::debug!(id = reply.to, "reply to a temp queue that no longer exists");
            return;
        };
        let mut buf = BytesMut::with_capacity(256 + reply.body.len());
        let id = MessageId::temp(shared.next_message.fetch_add(1, Ordering::Relaxed));
        target.head.read().encode_frame(
            &mut buf,
            id.as_str(),
            reply.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            &reply.body,
        );
        target.deliver(buf.freeze());
    }
}
