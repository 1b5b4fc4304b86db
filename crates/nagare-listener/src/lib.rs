//! The one listener layer of nagare, shared by every front end and knowing no protocol.
//!
//! [`run`] owns everything between `accept(2)` and a protocol's first byte: TCP_NODELAY,
//! the connection limits ([`ConnectionLimits`], total and per client IP, shared by every
//! listener like Kafka's `max.connections` and `max.connections.per.ip`), the tracking of
//! live connections (metrics), and graceful shutdown (stop accepting, let connections
//! finish for a bounded time, then abort them). A front end only says how to handle one
//! [`Connection`]. TLS and authentication plug in here, once, by filling in the
//! connection's stream and [`Principal`] before the front end sees it.

mod connection;
mod limits;
mod serve;

pub use connection::{Connection, Principal};
pub use limits::{ConnectionLimits, Permit, Rejection};
pub use serve::{run, ListenerOptions};
