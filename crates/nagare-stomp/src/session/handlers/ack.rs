//! ACK: `id` (1.2, the MESSAGE's `ack` header) or `message-id` (1.0, 1.1). Cumulative
//! for ack mode `client`. Acks of topic and temp-queue messages (never redelivered) and
//! of messages no longer in flight are accepted and ignored.

use crate::command::Settle;
use crate::queue_sub::parse_message_id;
use crate::session::{AckMode, Session, SubKind};

impl Session {
    pub(crate) fn on_ack(&mut self, settle: &Settle) {
        self.settle(settle, None)
    }

    /// ACK (`requeue` None) or NACK (`Some(requeue)`).
    pub(crate) fn settle(&mut self, settle: &Settle, requeue: Option<bool>) {
        let Some((num, offset)) = parse_message_id(self.id(), &settle.id) else {
            return;
        };
        let Some(sub) = self.sub_ids.get(&num).and_then(|s| self.subs.get(s)) else {
            return;
        };
        if let SubKind::Queue { queue, consumer } = &sub.kind {
            let cumulative = sub.ack == AckMode::Client;
            match requeue {
                None => queue.ack(*consumer, offset, cumulative),
                Some(r) => queue.nack(*consumer, offset, cumulative, r),
            };
        }
    }
}
