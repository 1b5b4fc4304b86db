//! The one listener layer of nagare, shared by every front end and knowing no protocol.
//!
//! [`run`] owns everything between `accept(2)` and a protocol's first byte: TCP_NODELAY,
//! the connection limits ([`ConnectionLimits`], total and per client IP, shared by every
//! listener like Kafka's `max.connections` and `max.connections.per.ip`), the tracking of
//! live connections ([`ConnectionRegistry`], metrics), and graceful shutdown (stop accepting, let connections
//! finish for a bounded time, then abort them). A front end only says how to handle one
//! [`Connection`]. TLS plugs in here, once ([`TlsContext`]): the handshake, a client
//! certificate's [`Principal`], and an idle timeout happen before the front end sees the
//! connection's [`Stream`].

mod connection;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
mod limits;
mod registry;
mod serve;
mod stream;
mod tls;

pub use connection::{Connection, Principal};
pub use limits::{ConnectionLimits, Permit, Rejection};
pub use registry::{ConnectionInfo, ConnectionRegistry};
pub use serve::{run, ListenerOptions};
pub use stream::{ReadHalf, Stream, WriteHalf};
pub use tls::{ClientAuth, TlsContext, TlsError, TlsFiles};
