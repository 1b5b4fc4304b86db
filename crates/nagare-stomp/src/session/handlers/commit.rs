//! COMMIT: applies the transaction's SEND, ACK and NACK frames in order.

use crate::command::ClientCommand;
use crate::error::StompError;
use crate::session::Session;

impl Session {
    pub(crate) async fn on_commit(&mut self, transaction: &str) -> Result<(), StompError> {
        let held = self
            .transactions
            .remove(transaction)
            .ok_or_else(|| StompError::protocol(format!("unknown transaction {transaction:?}")))?;
        for mut request in held {
            match request.command {
                // The held SEND's receipt was answered when it was held; it still asks
                // for a durable append to a queue.
                ClientCommand::Send(send) => {
                    if let Some(mut append) = self.prepare_send(send, &mut request.receipt)? {
                        append.run().await?;
                    }
                }
                ClientCommand::Ack(settle) => self.on_ack(&settle),
                ClientCommand::Nack { settle, requeue } => self.on_nack(&settle, requeue),
                _ => {}
            }
        }
        Ok(())
    }
}
