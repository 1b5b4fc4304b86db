//! What a front end receives for each accepted connection.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;

pub use nagare_core::security::Principal;

use crate::registry::ConnectionInfo;
use crate::stream::Stream;

/// One accepted connection, counted against the limits until it is dropped.
pub struct Connection {
    /// Plain TCP or TLS; the handshake is already done.
    pub stream: Stream,
    pub peer: SocketAddr,
    /// The listener's name (`kafka`, `stomp`, `forward`), as in logs and metrics.
    pub listener: &'static str,
    /// Who the listener already knows the peer to be (a verified TLS client
    /// certificate); otherwise anonymous until the protocol's own login.
    pub principal: Principal,
    /// This listener demands authentication: the front end refuses everything but its
    /// login exchange until the peer has authenticated.
    pub auth_required: bool,
    /// Turns true when the server stops: finish what is in hand and close.
    pub shutdown: watch::Receiver<bool>,
    /// This connection's entry in the [`ConnectionRegistry`](crate::ConnectionRegistry):
    /// the front end sets the client id and the logged-in user there.
    pub info: Arc<ConnectionInfo>,
}

impl Connection {
    /// Resolves once the server is stopping (or the signal's sender is gone).
    pub async fn stopping(&mut self) {
        let _ = self.shutdown.wait_for(|s| *s).await;
    }
}
