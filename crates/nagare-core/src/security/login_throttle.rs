//! Failed logins are logged with the peer address and slowed down, per client IP, so a
//! password cannot be guessed at line rate. Every front end calls [`LoginThrottle::failed`]
//! after a wrong password or unknown user and waits what it returns before answering.
//!
//! Each IP's count of recent failures doubles its delay, from 100 ms up to 5 s; a success
//! from that IP, or a minute without failures, forgets them. The table is bounded: when
//! it is full and nothing in it is stale, a new IP gets the longest delay at once (a
//! flood of sources is treated as the attack it is).

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::log_limiter::{LogLimiter, LOG_INTERVAL};

const FIRST_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_secs(5);
/// Failures older than this are forgotten.
const QUIET: Duration = Duration::from_secs(60);
/// Client IPs remembered at most.
const MAX_PEERS: usize = 10_000;

static LOG: LogLimiter = LogLimiter::new(LOG_INTERVAL);

struct Failures {
    count: u32,
    last: Instant,
}

#[derive(Default)]
pub struct LoginThrottle {
    peers: Mutex<HashMap<IpAddr, Failures>>,
}

impl LoginThrottle {
    /// Records a failed login of `user` from `peer` over `protocol` (logged, counted in
    /// `nagare_auth_failures_total{protocol}`); returns how long to wait before replying.
    pub fn failed(&self, protocol: &'static str, peer: IpAddr, user: &str) -> Duration {
        metrics::counter!("nagare_auth_failures_total", "protocol" => protocol).increment(1);
        let now = Instant::now();
        let count = self.record(peer, now);
        if let Some(suppressed) = LOG.allow("authentication failed", now) {
            tracing::warn!(
                protocol,
                %peer,
                user,
                failures = count,
                suppressed,
                "authentication failed"
            );
        }
        delay_for(count)
    }

    /// A successful login from `peer` (forgets its failures). Prefer
    /// [`succeeded_over`](Self::succeeded_over), which also counts it.
    pub fn succeeded(&self, peer: IpAddr) {
        self.peers.lock().remove(&peer);
    }

    /// A successful login from `peer` over `protocol`: forgets the peer's failures and
    /// counts it in `nagare_auth_successes_total{protocol}`.
    pub fn succeeded_over(&self, protocol: &'static str, peer: IpAddr) {
        metrics::counter!("nagare_auth_successes_total", "protocol" => protocol).increment(1);
        self.succeeded(peer);
    }

    /// The peer's failure count after one more at `now`.
    fn record(&self, peer: IpAddr, now: Instant) -> u32 {
        let mut peers = self.peers.lock();
        if !peers.contains_key(&peer) && peers.len() >= MAX_PEERS {
            peers.retain(|_, f| now.saturating_duration_since(f.last) < QUIET);
            if peers.len() >= MAX_PEERS {
                return u32::MAX;
            }
        }
        let f = peers.entry(peer).or_insert(Failures {
            count: 0,
            last: now,
        });
        if now.saturating_duration_since(f.last) >= QUIET {
            f.count = 0;
        }
        f.count = f.count.saturating_add(1);
        f.last = now;
        f.count
    }

    #[cfg(test)]
    fn failures(&self, peer: IpAddr) -> Option<u32> {
        self.peers.lock().get(&peer).map(|f| f.count)
    }
}

/// 100 ms for the first failure, doubling, at most 5 s.
fn delay_for(count: u32) -> Duration {
    let doublings = count.saturating_sub(1).min(16);
    FIRST_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_doubles_to_a_cap() {
        assert_eq!(delay_for(1), Duration::from_millis(100));
        assert_eq!(delay_for(2), Duration::from_millis(200));
        assert_eq!(delay_for(4), Duration::from_millis(800));
        assert_eq!(delay_for(7), MAX_DELAY);
        assert_eq!(delay_for(u32::MAX), MAX_DELAY);
    }

    #[test]
    fn success_and_quiet_time_forget() {
        let t = LoginThrottle::default();
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        assert_eq!(t.failed("kafka", a, "u"), Duration::from_millis(100));
        assert_eq!(t.failed("kafka", a, "u"), Duration::from_millis(200));
        // Another IP is not slowed by a's failures.
        assert_eq!(t.failed("stomp", b, "u"), Duration::from_millis(100));
        t.succeeded_over("kafka", a);
        assert_eq!(t.failures(a), None);
        assert_eq!(t.failed("kafka", a, "u"), Duration::from_millis(100));
        // A failure after the quiet time starts over.
        let later = Instant::now() + QUIET + Duration::from_secs(1);
        assert_eq!(t.record(b, later), 1);
    }

    #[test]
    fn the_table_is_bounded() {
        let t = LoginThrottle::default();
        let now = Instant::now();
        for i in 0..MAX_PEERS as u32 {
            t.record(IpAddr::from(i.to_be_bytes()), now);
        }
        let new: IpAddr = [255, 255, 255, 255].into();
        assert_eq!(t.record(new, now), u32::MAX);
        assert_eq!(t.peers.lock().len(), MAX_PEERS);
        // Once the old entries are stale they make room.
        assert_eq!(t.record(new, now + QUIET), 1);
        assert_eq!(t.peers.lock().len(), 1);
    }
}
