//! STOMP 1.0/1.1/1.2 front end of nagare.
//!
//! Destinations, all on the shared log:
//! - `/topic/T` is Kafka topic `T`: each subscriber follows the log from when it
//!   subscribed (or from `x-stream-offset: first|last|next|<offset>`); SENDs become
//!   records (body -> value, `key` header -> key, other headers -> record headers), and
//!   records written by Kafka producers reach STOMP subscribers the same way back.
//! - `/queue/Q` is a persistent queue with competing consumers, stored in topic
//!   `queue.<Q>` with its acknowledgement state in an internal log
//!   ([`nagare_core::queues`]); a SEND with `receipt` is acknowledged once durable.
//! - `/temp-queue/NAME` (RPC over MQ): in memory only. A SEND with
//!   `reply-to:/temp-queue/NAME` creates the sender's private queue, the responder sees
//!   `reply-to:/reply-queue/<id>`, and replies arrive with `subscription:/temp-queue/NAME`
//!   without a SUBSCRIBE (RabbitMQ's way); an explicit SUBSCRIBE to `/temp-queue/NAME`
//!   (ActiveMQ's way) works too. The queue dies with its connection.
//!
//! The codec ([`decode`], [`encode`]) is sans-io and bounded; each client command has its
//! own handler file under `session/handlers/`.

mod command;
mod config;
mod conn;
pub mod decode;
mod dest;
mod dispatch;
pub mod encode;
pub mod error;
pub mod frame;
mod message;
mod queue_sub;
mod session;
mod temp;
mod topic_sub;
mod writer;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use nagare_core::queues::Queues;
use nagare_core::Broker;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use bytes;
pub use config::Config;
pub use decode::{Decoder, Limits};
pub use dest::{Dest, DestError};
pub use encode::{encode, FrameWriter};
pub use error::{FrameError, StompError};
pub use frame::{Command, Frame, Version};

/// Accepts connections on `listener` until `shutdown` turns true. `queues` comes opened
/// (and its background task running) from the caller.
pub async fn serve(
    listener: TcpListener,
    broker: Arc<Broker>,
    queues: Arc<Queues>,
    config: Config,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let shared = Arc::new(session::Shared {
        broker,
        outbound: writer::GlobalBudget::new(config.max_outbound_bytes),
        config,
        queues: queues.clone(),
        temp: Default::default(),
        next_conn: AtomicU64::new(1),
        next_message: AtomicU64::new(1),
        stopping: shutdown.clone(),
        live: AtomicUsize::new(0),
    });
    tracing::info!(addr = ?listener.local_addr().ok(), "stomp listener ready");
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of descriptors and the like: back off instead of spinning.
                        tracing::warn!(error = %e, "stomp accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                };
                tokio::spawn(conn::handle(stream, shared.clone()));
            }
            _ = shutdown.changed() => {
                // Connections see the same signal and close (requeueing what they had
                // in flight); then the last acknowledgements are written.
                let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(2);
                while shared.live.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                if let Err(e) = queues.flush().await {
                    tracing::warn!(error = %e, "could not write queue acknowledgements at shutdown");
                }
                return Ok(());
            }
        }
    }
}
