//! ABORT: drops everything the transaction held.

use crate::error::StompError;
use crate::frame::Frame;
use crate::handlers::required;
use crate::session::Session;

impl Session {
    pub(crate) async fn on_abort(&mut self, frame: &Frame) -> Result<(), StompError> {
        let tx = required(frame, "transaction")?;
        if self.transactions.remove(tx).is_none() {
            return Err(StompError::protocol(format!("unknown transaction {tx:?}")));
        }
        self.receipt_for(frame).await;
        Ok(())
    }
}
