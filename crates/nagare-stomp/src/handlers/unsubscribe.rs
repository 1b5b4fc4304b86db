//! UNSUBSCRIBE: by `id` (1.0 may name the destination instead). Unacknowledged queue
//! messages of the subscription are redelivered to others.

use crate::dest::Dest;
use crate::error::StompError;
use crate::frame::Frame;
use crate::session::{end_subscription, Session, SubKind};

impl Session {
    pub(crate) async fn on_unsubscribe(&mut self, frame: &Frame) -> Result<(), StompError> {
        let id = frame
            .header("id")
            .or_else(|| frame.header("destination"))
            .ok_or_else(|| StompError::missing("id", "UNSUBSCRIBE"))?
            .to_string();
        let sub = self
            .subs
            .remove(&id)
            .ok_or_else(|| StompError::protocol(format!("no subscription with id {id:?}")))?;
        self.sub_ids.remove(&sub.num);
        if let (SubKind::Temp { name }, Dest::TempQueue(_)) = (&sub.kind, &sub.dest) {
            // Back to RabbitMQ-style labelling of the temp queue's messages.
            if let Some(t) = self
                .temps
                .get(name)
                .and_then(|tid| self.shared.temp.get(tid))
            {
                let mut h = t.head.write();
                h.subscription = format!("/temp-queue/{name}");
                h.destination = format!("/reply-queue/{}", self.temps[name]);
            }
        }
        end_subscription(sub);
        self.receipt_for(frame).await;
        Ok(())
    }
}
