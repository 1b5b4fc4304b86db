//! NACK: like ACK; `requeue` (default true) puts the messages back, flagged redelivered;
//! `requeue:false` drops them.

use crate::command::Settle;
use crate::session::Session;

impl Session {
    pub(crate) fn on_nack(&mut self, settle: &Settle, requeue: bool) {
        self.settle(settle, Some(requeue))
    }
}
