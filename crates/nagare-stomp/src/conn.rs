//! One connection's reading side: read into a buffer, decode every complete frame in it,
//! run them in order (`dispatch`), and watch the client's heart-beats. Replies go through
//! the writer (`writer`), gathered over each read's frames (`outbox`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use nagare_listener::{ConnectionInfo, Stream};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::access::Access;
use crate::decode::Decoder;
use crate::dispatch::run_frames;
use crate::error::StompError;
use crate::frame::Command;
use crate::session::{Session, Shared};
use crate::writer;

const READ_SIZE: usize = 64 * 1024;
/// A client must CONNECT within this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) async fn handle(
    stream: Stream,
    shared: Arc<Shared>,
    access: Access,
    info: Arc<ConnectionInfo>,
    mut stopping: watch::Receiver<bool>,
) {
    let peer = stream.peer_addr().ok();
    let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
    let (mut rd, wr) = stream.into_split();
    let (out, mut dead, heartbeat_tx) = writer::spawn(
        id,
        wr,
        info.clone(),
        shared.config.outbound_buffer_bytes,
        shared.outbound.clone(),
    );
    let mut session = Session::new(shared.clone(), out.clone(), access).with_info(info);
    let mut decoder = Decoder::new(shared.config.limits());
    let mut buf = BytesMut::with_capacity(READ_SIZE);
    let mut deadline = Instant::now() + CONNECT_TIMEOUT;
    let mut frames = Vec::new();

    'conn: loop {
        // Decoded frames keep slices of the buffer (their bodies), so its front is rarely
        // free for reuse: asking for READ_SIZE of room before every read allocated a new
        // buffer per read (a pipelining client's read is a few KiB). A new one comes only
        // once less than a quarter of it is left.
        if buf.capacity() - buf.len() < READ_SIZE / 4 {
            buf.reserve(READ_SIZE);
        }
        tokio::select! {
            n = rd.read_buf(&mut buf) => match n {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            _ = dead.changed() => break,
            _ = stopped(&mut stopping) => break,
            _ = tokio::time::sleep_until(deadline) => {
                tracing::debug!(?peer, "peer silent beyond the heart-beat tolerance; dropping");
                break;
            }
        }
        if session.connected() {
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
            let was_connected = session.connected();
            // Frames before a bad one still run; then the bad one is refused.
            // Their replies leave in one write per destination (see `outbox`).
            let ran = crate::outbox::scope(run_frames(&mut session, &mut frames)).await;
            if !ran || session.closing() {
                break 'conn;
            }
            if let Some(e) = bad {
                session.reject(&StompError::from(e), None).await;
                break 'conn;
            }
            if session.connected() && !was_connected {
                decoder.version = session.version();
                let _ = heartbeat_tx.send(session.heartbeat().1);
                deadline = next_deadline(&session, &shared);
            }
            if !saw_connect {
                break;
            }
        }
    }
    out.close();
    session.cleanup();
}

/// When the client must have sent something by (far away without heart-beats).
fn next_deadline(session: &Session, shared: &Shared) -> Instant {
    let expected = session.heartbeat().0;
    if expected == 0 {
        return Instant::now() + Duration::from_secs(365 * 24 * 3600);
    }
    let tolerance = shared.config.heartbeat_tolerance.max(1.0);
    Instant::now() + Duration::from_millis((expected as f64 * tolerance) as u64 + 100)
}

/// Resolves once `stopping` is true (or its sender is gone); also when it already was.
async fn stopped(stopping: &mut watch::Receiver<bool>) {
    let _ = stopping.wait_for(|s| *s).await;
}
