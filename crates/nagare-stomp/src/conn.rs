//! One connection's reading side: read into a buffer, decode every complete frame in it,
//! run them in order (consecutive SENDs to the same log destination become one append),
//! and watch the client's heart-beats. Replies go through the writer task (`writer`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::decode::Decoder;
use crate::error::StompError;
use crate::frame::{Command, Frame};
use crate::handlers::send::Append;
use crate::session::{Session, Shared};
use crate::writer;

const READ_SIZE: usize = 64 * 1024;
/// A client must CONNECT within this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) async fn handle(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let peer = stream.peer_addr().ok();
    let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
    let (mut rd, wr) = stream.into_split();
    let (out, mut dead, heartbeat_tx) = writer::spawn(id, wr, shared.config.outbound_buffer_bytes);
    let mut session = Session::new(shared.clone(), out.clone());
    let mut decoder = Decoder::new(shared.config.limits());
    let mut buf = BytesMut::with_capacity(READ_SIZE);
    let mut deadline = Instant::now() + CONNECT_TIMEOUT;
    let mut frames = Vec::new();
    let mut stopping = shared.stopping.clone();
    shared.live.fetch_add(1, Ordering::AcqRel);

    'conn: loop {
        buf.reserve(READ_SIZE);
        tokio::select! {
            n = rd.read_buf(&mut buf) => match n {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            _ = dead.changed() => break,
            _ = stopping.changed() => break,
            _ = tokio::time::sleep_until(deadline) => {
                tracing::debug!(?peer, "peer silent beyond the heart-beat tolerance; dropping");
                break;
            }
        }
        if session.connected {
            deadline = next_deadline(&session, &shared);
        }
        // Decode and run every complete frame. A CONNECT ends a round early: the frames
        // after it must be decoded with the negotiated version's escaping.
        loop {
            let mut saw_connect = false;
            let mut bad = None;
            while !saw_connect {
                match decoder.decode(&mut buf) {
                    Ok(Some(f)) => {
                        saw_connect = matches!(f.command, Command::Connect | Command::Stomp);
                        frames.push(f);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        bad = Some(e);
                        break;
                    }
                }
            }
            let was_connected = session.connected;
            // Frames before a bad one still run; then the bad one is refused.
            if !run_frames(&mut session, &mut frames).await || session.closing {
                break 'conn;
            }
            if let Some(e) = bad {
                session.reject(&StompError::from(e), None).await;
                break 'conn;
            }
            if session.connected && !was_connected {
                decoder.version = session.version;
                let _ = heartbeat_tx.send(session.heartbeat.1);
                deadline = next_deadline(&session, &shared);
            }
            if !saw_connect {
                break;
            }
        }
    }
    out.close();
    session.cleanup();
    shared.live.fetch_sub(1, Ordering::AcqRel);
}

/// When the client must have sent something by (far away without heart-beats).
fn next_deadline(session: &Session, shared: &Shared) -> Instant {
    let expected = session.heartbeat.0;
    if expected == 0 {
        return Instant::now() + Duration::from_secs(365 * 24 * 3600);
    }
    let tolerance = shared.config.heartbeat_tolerance.max(1.0);
    Instant::now() + Duration::from_millis((expected as f64 * tolerance) as u64 + 100)
}

/// Runs the decoded frames in order. False when the connection must close (after an
/// ERROR has been queued).
async fn run_frames(session: &mut Session, frames: &mut Vec<Frame>) -> bool {
    let mut pending: Option<Append> = None;
    let mut ok = true;
    for frame in frames.drain(..) {
        if !ok {
            continue;
        }
        let receipt = frame.header("receipt").map(str::to_string);
        if let Err(e) = run_frame(session, frame, &mut pending).await {
            // Appends before the bad frame still happen and get their receipts.
            flush(session, &mut pending).await;
            session.reject(&e, receipt.as_deref()).await;
            ok = false;
        }
        if session.closing {
            break;
        }
    }
    frames.clear();
    if ok {
        ok = flush(session, &mut pending).await;
    }
    ok
}

async fn run_frame(
    session: &mut Session,
    frame: Frame,
    pending: &mut Option<Append>,
) -> Result<(), StompError> {
    if !session.connected && !matches!(frame.command, Command::Connect | Command::Stomp) {
        return Err(StompError::protocol(format!(
            "{} before CONNECT",
            frame.command.as_str()
        )));
    }
    if let (Command::Send | Command::Ack | Command::Nack, Some(tx)) =
        (frame.command, frame.header("transaction"))
    {
        let tx = tx.to_string();
        return session.hold_in_transaction(&tx, frame).await;
    }
    if frame.command != Command::Send && pending.is_some() && !flush(session, pending).await {
        return Err(StompError::protocol("append failed"));
    }
    match frame.command {
        Command::Connect | Command::Stomp => session.on_connect(&frame).await,
        Command::Send => {
            let receipt = frame.header("receipt").map(str::to_string);
            match session.prepare_send(frame).await? {
                None => {
                    flush(session, pending).await;
                    if let Some(r) = receipt {
                        session.send_receipt(&r).await;
                    }
                }
                Some(append) => {
                    let rest = match pending {
                        Some(p) => p.merge(append),
                        None => Some(append),
                    };
                    if let Some(next) = rest {
                        flush(session, pending).await;
                        *pending = Some(next);
                    }
                }
            }
            Ok(())
        }
        Command::Subscribe => session.on_subscribe(&frame).await,
        Command::Unsubscribe => session.on_unsubscribe(&frame).await,
        Command::Ack => {
            session.on_ack(&frame)?;
            session.receipt_for(&frame).await;
            Ok(())
        }
        Command::Nack => {
            session.on_nack(&frame)?;
            session.receipt_for(&frame).await;
            Ok(())
        }
        Command::Begin => session.on_begin(&frame).await,
        Command::Commit => session.on_commit(&frame).await,
        Command::Abort => session.on_abort(&frame).await,
        Command::Disconnect => session.on_disconnect(&frame).await,
        Command::Connected | Command::Message | Command::Receipt | Command::Error => Err(
            StompError::protocol(format!("{} is a server frame", frame.command.as_str())),
        ),
    }
}

/// Appends the batched SENDs and sends their receipts. False (after an ERROR) on failure.
async fn flush(session: &Session, pending: &mut Option<Append>) -> bool {
    let Some(append) = pending.take() else {
        return true;
    };
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
