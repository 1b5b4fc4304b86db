//! ABORT: drops everything the transaction held.

use crate::error::StompError;
use crate::session::Session;

impl Session {
    pub(crate) fn on_abort(&mut self, transaction: &str) -> Result<(), StompError> {
        if self.transactions.remove(transaction).is_none() {
            return Err(StompError::protocol(format!(
                "unknown transaction {transaction:?}"
            )));
        }
        Ok(())
    }
}
