//! Runs a connection's decoded frames in order: each is parsed into a typed command
//! ([`crate::command`]) and applied to the session by its handler. Consecutive SENDs to
//! the same log destination become one append; receipts are answered here once the
//! command has taken effect.

use crate::command::{ClientCommand, Request};
use crate::error::StompError;
use crate::frame::{Command, Frame};
use crate::session::Append;
use crate::session::Session;

/// Runs the decoded frames in order. False when the connection must close (after an
/// ERROR has been queued).
pub(crate) async fn run_frames(session: &mut Session, frames: &mut Vec<Frame>) -> bool {
    let mut pending: Option<Append> = None;
    let mut ok = true;
    for frame in frames.drain(..) {
        if !ok {
            continue;
        }
        // Frames after which other tasks start writing to this connection (CONNECTED
        // must come first; a SUBSCRIBE's RECEIPT before its messages): what they
        // produced goes out before the next frame runs.
        let starts_others = matches!(
            frame.command,
            Command::Connect | Command::Stomp | Command::Subscribe | Command::Unsubscribe
        );
        let res = run_frame(session, frame, &mut pending).await;
        if starts_others {
            crate::outbox::flush();
        }
        if let Err((e, receipt)) = res {
            // Appends before the bad frame still happen and get their receipts.
            flush(session, &mut pending).await;
            session.reject(&e, receipt.as_deref()).await;
            ok = false;
        }
        if session.closing() {
            break;
        }
    }
    frames.clear();
    if ok {
        ok = flush(session, &mut pending).await;
    }
    ok
}

/// An error with the receipt the refused frame asked for.
type Refusal = (StompError, Option<String>);

async fn run_frame(
    session: &mut Session,
    frame: Frame,
    pending: &mut Option<Append>,
) -> Result<(), Refusal> {
    crate::meters::frame_received(frame.command);
    if !session.connected() && !matches!(frame.command, Command::Connect | Command::Stomp) {
        let receipt = frame.header("receipt").map(str::to_string);
        let e = StompError::protocol(format!("{} before CONNECT", frame.command.as_str()));
        return Err((e, receipt));
    }
    let Request {
        mut receipt,
        command,
    } = Request::parse(frame, session.version())?;
    if let Some(tx) = command.transaction() {
        let tx = tx.to_string();
        let request = Request {
            receipt: receipt.clone(),
            command,
        };
        return match session.hold_in_transaction(&tx, request) {
            Ok(()) => {
                answer(session, receipt).await;
                Ok(())
            }
            Err(e) => Err((e, receipt)),
        };
    }
    if let ClientCommand::Send(send) = command {
        return match session.prepare_send(send, &mut receipt) {
            Err(e) => Err((e, receipt)),
            // Delivered to a temp queue: earlier appends first, then the receipt.
            Ok(None) => {
                flush(session, pending).await;
                answer(session, receipt).await;
                Ok(())
            }
            Ok(Some(append)) => {
                let rest = match pending {
                    Some(p) => p.merge(append),
                    None => Some(append),
                };
                if let Some(next) = rest {
                    flush(session, pending).await;
                    *pending = Some(next);
                }
                Ok(())
            }
        };
    }
    if pending.is_some() && !flush(session, pending).await {
        return Err((StompError::protocol("append failed"), receipt));
    }
    let applied = match command {
        ClientCommand::Connect(c) => session.on_connect(c).await,
        ClientCommand::Subscribe(s) => session.on_subscribe(s).await,
        ClientCommand::Unsubscribe { id } => session.on_unsubscribe(&id),
        ClientCommand::Ack(settle) => {
            session.on_ack(&settle);
            Ok(())
        }
        ClientCommand::Nack { settle, requeue } => {
            session.on_nack(&settle, requeue);
            Ok(())
        }
        ClientCommand::Begin { transaction } => session.on_begin(transaction),
        ClientCommand::Commit { transaction } => session.on_commit(&transaction).await,
        ClientCommand::Abort { transaction } => session.on_abort(&transaction),
        ClientCommand::Disconnect => {
            session.on_disconnect();
            Ok(())
        }
        ClientCommand::Send(_) => Ok(()),
    };
    match applied {
        Ok(()) => {
            answer(session, receipt).await;
            Ok(())
        }
        Err(e) => Err((e, receipt)),
    }
}

/// Sends the RECEIPT a frame asked for, if it asked.
async fn answer(session: &Session, receipt: Option<String>) {
    if let Some(r) = receipt {
        session.send_receipt(&r).await;
    }
}

/// Appends the batched SENDs and sends their receipts. False (after an ERROR) on failure.
async fn flush(session: &Session, pending: &mut Option<Append>) -> bool {
    let Some(mut append) = pending.take() else {
        return true;
    };
    // What earlier frames produced need not wait for the disk.
    crate::outbox::flush();
    match append.run().await {
        Ok(()) => {
            for r in &append.receipts {
                session.send_receipt(r).await;
            }
            true
        }
        Err(e) => {
            session
                .reject(&e, append.receipts.first().map(String::as_str))
                .await;
            false
        }
    }
}

#[cfg(test)]
mod tests;
