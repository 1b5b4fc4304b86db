//! BEGIN: opens a transaction; SEND, ACK and NACK naming it are held until COMMIT.

use crate::command::Request;
use crate::error::StompError;
use crate::session::Session;

impl Session {
    pub(crate) fn on_begin(&mut self, transaction: String) -> Result<(), StompError> {
        if self.transactions.contains_key(&transaction) {
            return Err(StompError::protocol(format!(
                "transaction {transaction:?} is already open"
            )));
        }
        self.transactions.insert(transaction, Vec::new());
        Ok(())
    }

    /// Holds a transactional SEND, ACK or NACK until COMMIT.
    pub(crate) fn hold_in_transaction(
        &mut self,
        transaction: &str,
        request: Request,
    ) -> Result<(), StompError> {
        let max = self.shared.config.max_transaction_frames;
        let held = self
            .transactions
            .get_mut(transaction)
            .ok_or_else(|| StompError::protocol(format!("unknown transaction {transaction:?}")))?;
        if held.len() >= max {
            return Err(StompError::protocol(format!(
                "transaction {transaction:?} holds more than {max} frames"
            )));
        }
        held.push(request);
        Ok(())
    }
}
