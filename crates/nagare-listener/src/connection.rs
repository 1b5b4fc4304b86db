//! What a front end receives for each accepted connection.

use std::net::SocketAddr;

use tokio::net::TcpStream;
use tokio::sync::watch;

/// Who is on the other end. Only anonymous today; authentication fills this in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Principal {
    #[default]
    Anonymous,
}

/// One accepted connection, counted against the limits until it is dropped.
pub struct Connection {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    /// The listener's name (`kafka`, `stomp`, `forward`), as in logs and metrics.
    pub listener: &'static str,
    pub principal: Principal,
    /// Turns true when the server stops: finish what is in hand and close.
    pub shutdown: watch::Receiver<bool>,
}

impl Connection {
    /// Resolves once the server is stopping (or the signal's sender is gone).
    pub async fn stopping(&mut self) {
        let _ = self.shutdown.wait_for(|s| *s).await;
    }
}
