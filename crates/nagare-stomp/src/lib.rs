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

mod access;
mod command;
mod config;
mod conn;
pub mod decode;
mod dest;
mod dispatch;
pub mod encode;
pub mod error;
pub mod frame;
pub mod headers;
mod message;
mod meters;
mod outbox;
mod queue_sub;
mod session;
mod temp;
mod topic_sub;
mod writer;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use nagare_core::queues::Queues;
use nagare_core::security::Security;
use nagare_core::Broker;
use nagare_listener::Connection;

pub use bytes;
pub use config::Config;
pub use decode::{Decoder, Limits, RawFrame};
pub use dest::{Dest, DestError};
pub use encode::{encode, FrameWriter};
pub use error::{FrameError, StompError};
pub use frame::{Command, Frame, Version};
pub use headers::Headers;

/// What every connection of one STOMP listener shares (cheap to clone). `queues` comes
/// opened, its background task running, from the caller.
#[derive(Clone)]
pub struct StompState(Arc<session::Shared>);

impl StompState {
    pub fn new(
        broker: Arc<Broker>,
        queues: Arc<Queues>,
        security: Security,
        config: Config,
    ) -> StompState {
        let replies = broker.reply_router();
        let shared = Arc::new(session::Shared {
            temp_prefix: replies
                .as_ref()
                .map_or_else(String::new, |r| r.id_prefix().to_string()),
            replies,
            broker,
            security,
            outbound: writer::GlobalBudget::new(config.max_outbound_bytes),
            config,
            queues,
            temp: Default::default(),
            next_conn: AtomicU64::new(1),
            next_message: AtomicU64::new(1),
        });
        // Cluster mode: replies other gateways send to this one's temp queues.
        if let Some(router) = &shared.replies {
            router.set_inbox(Arc::new(temp::Inbox::new(&shared)));
        }
        StompState(shared)
    }
}

/// Serves one accepted connection until the client leaves or the server stops; at a
/// stop, what the connection had in flight on queues is requeued (the caller writes the
/// last acknowledgements with `Queues::flush` once every connection is done).
/// Accepting, limits and shutdown are the listener layer's ([`nagare_listener`]).
pub async fn handle(conn: Connection, state: StompState) {
    let access = access::Access::new(
        state.0.security.clone(),
        conn.peer.ip(),
        conn.principal,
        conn.auth_required,
    );
    conn::handle(conn.stream, state.0, access, conn.info, conn.shutdown).await;
}
