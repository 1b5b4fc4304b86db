//! The registry of open connections: every accepted connection of every listener has an
//! entry from accept to close (`GET /connections`, the open counts of `/status`, the
//! `nagare_connections_open` gauge read at scrape time).
//!
//! The listener layer registers and deregisters; the front end only fills in what its
//! protocol learns later (a Kafka `client.id`, a login) through [`ConnectionInfo`], which
//! it finds in [`Connection::info`](crate::Connection::info). Byte counts are kept by the
//! connection's [`Stream`](crate::Stream) itself, so every protocol is measured alike.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::stream::Activity;

/// Every open connection of the server. One per server, shared by all its listeners
/// (through [`ListenerOptions::registry`](crate::ListenerOptions::registry)) and the
/// admin API.
#[derive(Default)]
pub struct ConnectionRegistry {
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, Arc<ConnectionInfo>>>,
}

/// One open connection, as the registry and the front end see it.
pub struct ConnectionInfo {
    id: u64,
    protocol: &'static str,
    listener: &'static str,
    peer: SocketAddr,
    opened_at_ms: i64,
    client_id: Mutex<Option<Arc<str>>>,
    user: Mutex<Option<Arc<str>>>,
    pub(crate) activity: Arc<Activity>,
}

/// Removes its entry from the registry when dropped (closing, or the task aborted).
pub(crate) struct Registration {
    registry: Arc<ConnectionRegistry>,
    info: Arc<ConnectionInfo>,
}

impl ConnectionRegistry {
    pub fn new() -> Arc<ConnectionRegistry> {
        Arc::default()
    }

    pub(crate) fn register(
        self: &Arc<Self>,
        protocol: &'static str,
        listener: &'static str,
        peer: SocketAddr,
    ) -> Registration {
        let info = Arc::new(ConnectionInfo {
            id: self.next_id.fetch_add(1, Ordering::Relaxed) + 1,
            protocol,
            listener,
            peer,
            opened_at_ms: nagare_core::log::now_ms(),
            client_id: Mutex::new(None),
            user: Mutex::new(None),
            activity: Activity::new(),
        });
        self.open.lock().insert(info.id, info.clone());
        Registration {
            registry: self.clone(),
            info,
        }
    }

    /// The open connections, oldest first.
    pub fn snapshot(&self) -> Vec<Arc<ConnectionInfo>> {
        let mut v: Vec<_> = self.open.lock().values().cloned().collect();
        v.sort_by_key(|c| c.id);
        v
    }

    /// How many connections of `protocol` (`kafka`, `stomp`, `forward`, `http`) are open.
    pub fn open_count(&self, protocol: &str) -> usize {
        self.open
            .lock()
            .values()
            .filter(|c| c.protocol == protocol)
            .count()
    }

    /// Open connections per (protocol, listener), for the `nagare_connections_open` gauge.
    pub fn open_by_listener(&self) -> BTreeMap<(&'static str, &'static str), usize> {
        let mut out = BTreeMap::new();
        for c in self.open.lock().values() {
            *out.entry((c.protocol, c.listener)).or_insert(0) += 1;
        }
        out
    }
}

impl ConnectionInfo {
    /// An entry in no registry, for a front end driven without a listener (tests, tools).
    pub fn standalone(protocol: &'static str, peer: SocketAddr) -> Arc<ConnectionInfo> {
        Arc::new(ConnectionInfo {
            id: 0,
            protocol,
            listener: protocol,
            peer,
            opened_at_ms: nagare_core::log::now_ms(),
            client_id: Mutex::new(None),
            user: Mutex::new(None),
            activity: Activity::new(),
        })
    }

    /// Unique for the life of the process, growing with each accepted connection.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// `kafka`, `stomp`, `forward` or `http`.
    pub fn protocol(&self) -> &'static str {
        self.protocol
    }

    /// The listener's name (`kafka`, or `kafka.1` for an extra listener).
    pub fn listener(&self) -> &'static str {
        self.listener
    }

    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    pub fn opened_at_ms(&self) -> i64 {
        self.opened_at_ms
    }

    /// What the client calls itself (Kafka's `client.id`, a STOMP `client-id` header).
    pub fn client_id(&self) -> Option<Arc<str>> {
        self.client_id.lock().clone()
    }

    /// Sets the client id; cheap when it did not change (Kafka sends it on every request).
    pub fn set_client_id(&self, id: &str) {
        let mut current = self.client_id.lock();
        if current.as_deref() != Some(id) {
            *current = Some(id.into());
        }
    }

    /// Who logged in (SASL, STOMP login, forward user, TLS certificate), if anybody.
    pub fn user(&self) -> Option<Arc<str>> {
        self.user.lock().clone()
    }

    pub fn set_user(&self, user: &str) {
        *self.user.lock() = Some(user.into());
    }

    /// Bytes received from the peer so far.
    pub fn bytes_in(&self) -> u64 {
        self.activity.bytes_in()
    }

    /// Bytes sent to the peer so far.
    pub fn bytes_out(&self) -> u64 {
        self.activity.bytes_out()
    }

    /// Counts bytes written around the connection's [`Stream`](crate::Stream) (a split
    /// writing half used directly, `sendfile`).
    pub fn count_out(&self, bytes: u64) {
        self.activity.sent(bytes);
    }
}

impl Registration {
    pub(crate) fn info(&self) -> &Arc<ConnectionInfo> {
        &self.info
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.open.lock().remove(&self.info.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> SocketAddr {
        "127.0.0.1:5555".parse().unwrap()
    }

    #[test]
    fn entries_live_while_registered() {
        let reg = ConnectionRegistry::new();
        let a = reg.register("kafka", "kafka", peer());
        let b = reg.register("stomp", "stomp", peer());
        let c = reg.register("kafka", "kafka.1", peer());
        assert_eq!(reg.open_count("kafka"), 2);
        assert_eq!(reg.open_count("stomp"), 1);
        assert_eq!(reg.open_count("http"), 0);
        let by = reg.open_by_listener();
        assert_eq!(by[&("kafka", "kafka.1")], 1);
        let ids: Vec<u64> = reg.snapshot().iter().map(|c| c.id()).collect();
        assert_eq!(ids, vec![a.info().id(), b.info().id(), c.info().id()]);
        assert!(a.info().id() < b.info().id());
        drop(a);
        assert_eq!(reg.open_count("kafka"), 1);
        drop((b, c));
        assert!(reg.snapshot().is_empty());
    }

    #[test]
    fn client_id_user_and_bytes() {
        let reg = ConnectionRegistry::new();
        let r = reg.register("kafka", "kafka", peer());
        let info = r.info().clone();
        assert_eq!(info.client_id(), None);
        info.set_client_id("app-1");
        info.set_client_id("app-1");
        info.set_user("alice");
        info.count_out(10);
        assert_eq!(info.client_id().as_deref(), Some("app-1"));
        assert_eq!(info.user().as_deref(), Some("alice"));
        assert_eq!(info.bytes_out(), 10);
        assert_eq!(info.bytes_in(), 0);
        assert!(info.opened_at_ms() > 0);
        assert_eq!(info.peer(), peer());
    }
}
