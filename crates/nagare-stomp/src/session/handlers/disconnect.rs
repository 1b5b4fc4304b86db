//! DISCONNECT: the receipt (if asked) is the last frame; then the socket closes.

use crate::session::Session;

impl Session {
    pub(crate) fn on_disconnect(&mut self) {
        self.closing = true;
    }
}
