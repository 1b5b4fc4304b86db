//! UNSUBSCRIBE: by `id` (1.0 may name the destination instead). Unacknowledged queue
//! messages of the subscription are redelivered to others.

use crate::dest::Dest;
use crate::error::StompError;
use crate::session::{end_subscription, Session, SubKind};

impl Session {
    pub(crate) fn on_unsubscribe(&mut self, id: &str) -> Result<(), StompError> {
        let sub = self
            .subs
            .remove(id)
            .ok_or_else(|| StompError::protocol(format!("no subscription with id {id:?}")))?;
        self.sub_ids.remove(&sub.num);
        if let (SubKind::Temp { name }, Dest::TempQueue(_)) = (&sub.kind, &sub.dest) {
            // Back to RabbitMQ-style labelling of the temp queue's messages.
            if let Some(t) = self
                .temps
                .get(name)
                .and_then(|tid| self.shared.temp.get(tid))
            {
                t.head.write().retarget(
                    format!("/reply-queue/{}", self.temps[name]),
                    &format!("/temp-queue/{name}"),
                );
            }
        }
        crate::meters::subscription_ended(&sub);
        end_subscription(sub);
        Ok(())
    }
}
