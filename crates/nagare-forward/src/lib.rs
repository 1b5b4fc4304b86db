//! Fluentd forward protocol v1 receiver of nagare (planned: this crate only binds and closes politely for now).

use std::sync::Arc;

use nagare_core::Broker;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Settings of the forward listener (the `[forward]` table of nagare.toml).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Config {}

/// Accepts connections on `listener` until `shutdown` turns true.
pub async fn serve(
    listener: TcpListener,
    broker: Arc<Broker>,
    config: Config,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let _ = (broker, config);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (mut stream, peer) = accepted?;
                tracing::info!(%peer, "forward front end not implemented yet; closing connection");
                let _ = stream.shutdown().await;
            }
            _ = shutdown.changed() => return Ok(()),
        }
    }
}
