//! NACK: like ACK; `requeue` (default true) puts the messages back, flagged redelivered;
//! `requeue:false` drops them.

use crate::error::StompError;
use crate::frame::Frame;
use crate::session::Session;

impl Session {
    pub(crate) fn on_nack(&mut self, frame: &Frame) -> Result<(), StompError> {
        let requeue = frame.header("requeue") != Some("false");
        self.settle(frame, Some(requeue))
    }
}
