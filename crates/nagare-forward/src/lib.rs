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
pub mod budget;
pub mod config;
mod conn;
pub mod dead_letter;
pub mod decode;
pub mod error;
pub mod ingest;
pub mod json;
pub mod msgpack;
pub mod reject;
pub mod route;

use std::sync::Arc;

use nagare_core::Broker;
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::watch;

pub use bytes;
pub use config::{Config, Format, Route, User};
pub use decode::{Decoder, Frame, Limits, Request};
pub use error::DecodeError;

/// Accepts connections on `listener` (and heartbeats on the same address over UDP)
/// until `shutdown` turns true.
pub async fn serve(
    listener: TcpListener,
    broker: Arc<Broker>,
    config: Config,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let router = route::Router::new(&config.routes, config.default_format)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let addr = listener.local_addr()?;
    if config.udp_heartbeat {
        match UdpSocket::bind(addr).await {
            Ok(sock) => {
                tokio::spawn(heartbeats(sock, shutdown.clone()));
            }
            // The TCP side works without it; senders then fall back to TCP heartbeats.
            Err(e) => tracing::warn!(%addr, error = %e, "cannot bind the UDP heartbeat socket"),
        }
    }
    tracing::info!(
        %addr,
        routes = config.routes.len(),
        auth = !config.shared_key.is_empty(),
        "forward receiver ready"
    );
    let shared = Arc::new(conn::Shared::new(broker, router, config));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: keep serving the others.
                        tracing::warn!(error = %e, "forward accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                };
                metrics::counter!("nagare_forward_connections_total").increment(1);
                let shared = shared.clone();
                let mut stop = shutdown.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        done = conn::handle(stream, shared) => match done {
                            Ok(events) => tracing::debug!(%peer, events, "forward connection closed"),
                            Err(e) => {
                                metrics::counter!("nagare_forward_connection_errors_total", "reason" => e.kind())
                                    .increment(1);
                                tracing::warn!(%peer, reason = e.kind(), error = %e, "forward connection closed");
                            }
                        },
                        _ = stopped(&mut stop) => {}
                    }
                });
            }
            _ = stopped(&mut shutdown) => return Ok(()),
        }
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
