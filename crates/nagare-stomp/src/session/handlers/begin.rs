//! BEGIN: opens a transaction; SEND, ACK and NACK naming it are held until COMMIT.

use nagare_core::security::Operation;

use crate::command::{ClientCommand, Request};
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

    /// Holds a transactional SEND, ACK or NACK until COMMIT. A SEND the connection may
    /// not make is refused now, not at COMMIT.
    pub(crate) fn hold_in_transaction(
        &mut self,
        transaction: &str,
        request: Request,
    ) -> Result<(), StompError> {
        if let ClientCommand::Send(send) = &request.command {
            self.access.authorize(Operation::Write, &send.dest)?;
        }
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
