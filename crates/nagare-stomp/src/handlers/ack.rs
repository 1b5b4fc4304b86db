//! ACK: `id` (1.2, the MESSAGE's `ack` header) or `message-id` (1.0, 1.1). Cumulative
//! for ack mode `client`. Acks of topic and temp-queue messages (never redelivered) and
//! of messages no longer in flight are accepted and ignored.

use crate::error::StompError;
use crate::frame::{Frame, Version};
use crate::queue_sub::parse_message_id;
use crate::session::{AckMode, Session, SubKind};

impl Session {
    pub(crate) fn on_ack(&mut self, frame: &Frame) -> Result<(), StompError> {
        self.settle(frame, None)
    }

    /// ACK (`requeue` None) or NACK (`Some(requeue)`).
    pub(crate) fn settle(
        &mut self,
        frame: &Frame,
        requeue: Option<bool>,
    ) -> Result<(), StompError> {
        // 1.2 names the message by `id` (the MESSAGE's `ack` header) and requires it;
        // 1.0 and 1.1 use `message-id`.
        let id = if self.version == Version::V1_2 {
            frame.header("id")
        } else {
            frame.header("message-id").or_else(|| frame.header("id"))
        };
        let id = id.ok_or_else(|| {
            let name = if self.version == Version::V1_2 {
                "id"
            } else {
                "message-id"
            };
            StompError::missing(name, frame.command.as_str())
        })?;
        let Some((num, offset)) = parse_message_id(self.id(), id) else {
            return Ok(());
        };
        let Some(sub) = self.sub_ids.get(&num).and_then(|s| self.subs.get(s)) else {
            return Ok(());
        };
        if let SubKind::Queue { queue, consumer } = &sub.kind {
            let cumulative = sub.ack == AckMode::Client;
            match requeue {
                None => queue.ack(*consumer, offset, cumulative),
                Some(r) => queue.nack(*consumer, offset, cumulative, r),
            };
        }
        Ok(())
    }
}
