//! DISCONNECT: the receipt (if asked) is the last frame; then the socket closes.

use crate::error::StompError;
use crate::frame::Frame;
use crate::session::Session;

impl Session {
    pub(crate) async fn on_disconnect(&mut self, frame: &Frame) -> Result<(), StompError> {
        self.receipt_for(frame).await;
        self.closing = true;
        Ok(())
    }
}
