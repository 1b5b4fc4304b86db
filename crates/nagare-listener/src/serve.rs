//! The accept loop every listener runs, and its graceful shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::connection::{Connection, Principal};
use crate::limits::{ConnectionLimits, Permit};
use crate::registry::{ConnectionRegistry, Registration};
use crate::stream::{Activity, Stream};
use crate::tls::{principal_of, TlsContext};

/// How one listener runs.
#[derive(Clone)]
pub struct ListenerOptions {
    /// Name in logs and metrics (`listener` label).
    pub name: &'static str,
    /// The protocol served (`kafka`, `stomp`, `forward`, `http`): the registry's and the
    /// metrics' `protocol`.
    pub protocol: &'static str,
    /// Where every accepted connection is registered until it closes; one per server.
    pub registry: Arc<ConnectionRegistry>,
    /// Shared by every listener of the server.
    pub limits: Arc<ConnectionLimits>,
    /// After shutdown, how long connections may take to finish before they are aborted.
    pub grace: Duration,
    /// Connections must authenticate (see [`Connection::auth_required`]).
    pub auth_required: bool,
    /// TLS on this listener: every connection's handshake happens here, before the front
    /// end sees a byte.
    pub tls: Option<Arc<TlsContext>>,
    /// Close a connection that moved no byte either way for this long (Kafka's
    /// `connections.max.idle.ms`); `None`: never.
    pub idle_timeout: Option<Duration>,
}

/// How long a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Pause after a failed accept (out of descriptors and the like) instead of spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Accepts connections on `tcp` and runs `handle` for each, until `shutdown` turns true;
/// then stops accepting, waits up to `options.grace` for the connections (which see the
/// same signal in [`Connection::shutdown`]) and aborts those still running.
pub async fn run<H, F>(
    tcp: TcpListener,
    options: ListenerOptions,
    handle: H,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()>
where
    H: Fn(Connection) -> F + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let name = options.name;
    let handle = Arc::new(handle);
    let mut live = JoinSet::new();
    // What each connection watches; `shutdown` itself is borrowed by the loop's select.
    let conn_shutdown = shutdown.clone();
    loop {
        tokio::select! {
            accepted = tcp.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(listener = name, error = %e, "accept failed");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                };
                let permit = match options.limits.admit(peer.ip()) {
                    Ok(p) => p,
                    Err(why) => {
                        // Closed at once, before the protocol sees a byte (Kafka does the same).
                        drop(stream);
                        metrics::counter!(
                            "nagare_connections_rejected_total",
                            "listener" => name,
                            "reason" => why.reason()
                        )
                        .increment(1);
                        tracing::warn!(listener = name, %peer, reason = why.reason(), "connection refused: over the limit");
                        continue;
                    }
                };
                let handle = handle.clone();
                let options = options.clone();
                let shutdown = conn_shutdown.clone();
                let registration = options.registry.register(options.protocol, name, peer);
                let info = registration.info().clone();
                live.spawn(tracked(registration, permit, async move {
                    let activity = info.activity.clone();
                    let Some((stream, principal)) = secure(stream, peer, &options, &activity).await else {
                        return;
                    };
                    if let Principal::User(user) = &principal {
                        info.set_user(user);
                    }
                    let conn = Connection {
                        stream,
                        peer,
                        listener: name,
                        principal,
                        auth_required: options.auth_required,
                        shutdown,
                        info,
                    };
                    match options.idle_timeout {
                        Some(limit) => {
                            tokio::select! {
                                _ = handle(conn) => {}
                                _ = idle(&activity, limit) => {
                                    tracing::debug!(listener = name, %peer, "closing connection idle for {limit:?}");
                                    metrics::counter!("nagare_connections_idle_closed_total", "listener" => name).increment(1);
                                }
                            }
                        }
                        None => handle(conn).await,
                    }
                }));
            }
            // Reap finished connections so the set holds only live ones.
            Some(_) = live.join_next(), if !live.is_empty() => {}
            _ = stopped(&mut shutdown) => break,
        }
    }
    drop(tcp);
    let drained = tokio::time::timeout(options.grace, async {
        while live.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            listener = name,
            open = live.len(),
            "connections still open after {:?}; closing them",
            options.grace
        );
        live.shutdown().await;
    }
    Ok(())
}

/// Prepares an accepted socket: TCP_NODELAY, then the TLS handshake when the listener
/// has TLS. `None` when the handshake failed (logged and counted; the socket is closed).
async fn secure(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    options: &ListenerOptions,
    activity: &Arc<Activity>,
) -> Option<(Stream, Principal)> {
    let listener = options.name;
    // Latency first: every front end batches its own writes.
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(listener, %peer, error = %e, "cannot set TCP_NODELAY");
    }
    let Some(tls) = &options.tls else {
        return Some((
            Stream::plain(stream, activity.clone()),
            Principal::Anonymous,
        ));
    };
    let accepted = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor().accept(stream)).await;
    let failure = match accepted {
        Ok(Ok(tls_stream)) => {
            let principal = principal_of(tls_stream.get_ref().1.peer_certificates());
            return Some((Stream::tls(tls_stream, activity.clone()), principal));
        }
        // A plaintext client on a TLS port: its first bytes are no TLS record.
        Ok(Err(e)) if e.to_string().contains("InvalidContentType") => {
            "the client did not speak TLS (plaintext to a TLS port?)".to_string()
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no handshake within {HANDSHAKE_TIMEOUT:?}"),
    };
    metrics::counter!("nagare_tls_handshake_failures_total", "listener" => listener).increment(1);
    tracing::info!(listener, %peer, error = %failure, "TLS handshake failed; connection closed");
    None
}

/// Resolves once the connection has been idle for `limit`.
async fn idle(activity: &Activity, limit: Duration) {
    loop {
        let quiet = activity.idle_for();
        if quiet >= limit {
            return;
        }
        tokio::time::sleep(limit - quiet + Duration::from_millis(10)).await;
    }
}

/// Runs one connection, registered, counted in the metrics and the limits while it lives
/// (also when it is aborted: the guard's drop does the closing half), with a debug line
/// when it opens and one when it closes.
async fn tracked(registration: Registration, permit: Permit, conn: impl Future<Output = ()>) {
    struct Open {
        registration: Registration,
        _permit: Permit,
    }
    impl Drop for Open {
        fn drop(&mut self) {
            let info = self.registration.info();
            metrics::counter!(
                "nagare_connections_closed_total",
                "protocol" => info.protocol(),
                "listener" => info.listener()
            )
            .increment(1);
            tracing::debug!(
                id = info.id(),
                listener = info.listener(),
                peer = %info.peer(),
                client_id = %info.client_id().as_deref().unwrap_or("-"),
                user = %info.user().as_deref().unwrap_or("-"),
                bytes_in = info.bytes_in(),
                bytes_out = info.bytes_out(),
                open_ms = nagare_core::log::now_ms().saturating_sub(info.opened_at_ms()),
                "connection closed"
            );
        }
    }
    let info = registration.info();
    metrics::counter!(
        "nagare_connections_accepted_total",
        "protocol" => info.protocol(),
        "listener" => info.listener()
    )
    .increment(1);
    tracing::debug!(id = info.id(), listener = info.listener(), peer = %info.peer(), "connection opened");
    let _open = Open {
        registration,
        _permit: permit,
    };
    conn.await;
}

/// Resolves once `shutdown` is true (or its sender is gone).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}
