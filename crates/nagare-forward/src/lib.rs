//! Fluentd forward protocol v1 receiver of nagare.
//!
//! Log shippers (Fluentd `out_forward`, Fluent Bit, fluent-logger libraries, Fluency)
//! send here exactly as to Fluentd's `in_forward`: Message, Forward, PackedForward and
//! CompressedPackedForward (gzip, also sent as `str`, and zstd), `chunk` acks sent only
//! once the events are as durable as the topic's flush policy says, the shared-key
//! handshake, and heartbeats (UDP `0x00` on the same port; `nil` over TCP).
//!
//! Events are routed by tag into topics ([`route`]), one record per event, one record
//! batch per request ([`ingest`]). The decoder ([`decode`]) is sans-io and bounded.

pub mod auth;
pub mod authz;
pub mod budget;
pub mod config;
mod conn;
pub mod dead_letter;
pub mod decode;
pub mod error;
pub mod ingest;
pub mod json;
mod merge;
pub mod msgpack;
pub mod reject;
pub mod route;
pub mod route_stats;

use std::net::SocketAddr;
use std::sync::Arc;

use nagare_core::security::Security;
use nagare_core::Broker;
use nagare_listener::Connection;
use tokio::net::UdpSocket;
use tokio::sync::watch;

pub use bytes;
pub use config::{Config, Format, Route, User};
pub use decode::{Decoder, Frame, Limits, Request};
pub use error::DecodeError;

pub use conn::Shared as ForwardState;

/// What every connection of one forward listener shares; fails on routes that do not
/// compile.
pub fn state(
    broker: Arc<Broker>,
    config: Config,
    security: Security,
) -> std::io::Result<Arc<ForwardState>> {
    let router = route::Router::new(&config.routes, config.default_format)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    tracing::info!(
        routes = config.routes.len(),
        auth = !config.shared_key.is_empty(),
        "forward receiver ready"
    );
    Ok(Arc::new(conn::Shared::new(
        broker, router, config, security,
    )))
}

/// Answers Fluentd's UDP heartbeats on `addr` (the TCP listener's address) until
/// `shutdown` turns true, when `[forward] udp_heartbeat` is on.
pub async fn start_udp_heartbeats(
    addr: SocketAddr,
    state: &ForwardState,
    shutdown: watch::Receiver<bool>,
) {
    if !state.config.udp_heartbeat {
        return;
    }
    match UdpSocket::bind(addr).await {
        Ok(sock) => {
            tokio::spawn(heartbeats(sock, shutdown));
        }
        // The TCP side works without it; senders then fall back to TCP heartbeats.
        Err(e) => tracing::warn!(%addr, error = %e, "cannot bind the UDP heartbeat socket"),
    }
}

/// Serves one accepted connection until the client leaves or the server stops (a
/// stop drops it at once: chunks not yet acknowledged are resent by the sender).
/// Accepting, limits and shutdown are the listener layer's ([`nagare_listener`]).
pub async fn handle(conn: Connection, state: Arc<ForwardState>) {
    metrics::counter!("nagare_forward_connections_total").increment(1);
    let peer = conn.peer;
    let mut stop = conn.shutdown.clone();
    let who = conn::Peer {
        addr: peer,
        principal: conn.principal,
        auth_required: conn.auth_required,
        info: conn.info.clone(),
    };
    tokio::select! {
        done = conn::handle(conn.stream, state, who) => match done {
            Ok(events) => tracing::debug!(%peer, events, "forward connection closed"),
            Err(e) => {
                metrics::counter!("nagare_forward_connection_errors_total", "reason" => e.kind())
                    .increment(1);
                tracing::warn!(%peer, reason = e.kind(), error = %e, "forward connection closed");
            }
        },
        _ = stopped(&mut stop) => {}
    }
}

/// Fluentd's UDP heartbeat: a datagram is answered with a single `0x00` byte.
async fn heartbeats(sock: UdpSocket, mut shutdown: watch::Receiver<bool>) {
    let mut buf = [0u8; 64];
    loop {
        tokio::select! {
            got = sock.recv_from(&mut buf) => match got {
                Ok((_, peer)) => {
                    let _ = sock.send_to(&[0u8], peer).await;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "heartbeat receive failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
            _ = stopped(&mut shutdown) => return,
        }
    }
}

/// Resolves once `shutdown` is true (or its sender is gone).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}
