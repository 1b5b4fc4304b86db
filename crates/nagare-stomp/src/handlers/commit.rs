//! COMMIT: applies the transaction's SEND, ACK and NACK frames in order.

use crate::error::StompError;
use crate::frame::{Command, Frame};
use crate::handlers::required;
use crate::session::Session;

impl Session {
    pub(crate) async fn on_commit(&mut self, frame: &Frame) -> Result<(), StompError> {
        let tx = required(frame, "transaction")?;
        let held = self
            .transactions
            .remove(tx)
            .ok_or_else(|| StompError::protocol(format!("unknown transaction {tx:?}")))?;
        for f in held {
            match f.command {
                Command::Send => {
                    if let Some(append) = self.prepare_send(f).await? {
                        append.run().await?;
                    }
                }
                Command::Ack => self.on_ack(&f)?,
                Command::Nack => self.on_nack(&f)?,
                _ => {}
            }
        }
        self.receipt_for(frame).await;
        Ok(())
    }
}
