//! BEGIN: opens a transaction; SEND, ACK and NACK naming it are held until COMMIT.

use crate::error::StompError;
use crate::frame::Frame;
use crate::handlers::required;
use crate::session::Session;

impl Session {
    pub(crate) async fn on_begin(&mut self, frame: &Frame) -> Result<(), StompError> {
        let tx = required(frame, "transaction")?;
        if self.transactions.contains_key(tx) {
            return Err(StompError::protocol(format!(
                "transaction {tx:?} is already open"
            )));
        }
        self.transactions.insert(tx.to_string(), Vec::new());
        self.receipt_for(frame).await;
        Ok(())
    }

    /// Holds a transactional frame until COMMIT.
    pub(crate) async fn hold_in_transaction(
        &mut self,
        tx: &str,
        frame: Frame,
    ) -> Result<(), StompError> {
        let max = self.shared.config.max_transaction_frames;
        let held = self
            .transactions
            .get_mut(tx)
            .ok_or_else(|| StompError::protocol(format!("unknown transaction {tx:?}")))?;
        if held.len() >= max {
            return Err(StompError::protocol(format!(
                "transaction {tx:?} holds more than {max} frames"
            )));
        }
        let receipt = frame.header("receipt").map(str::to_string);
        held.push(frame);
        if let Some(r) = receipt {
            self.send_receipt(&r).await;
        }
        Ok(())
    }
}
