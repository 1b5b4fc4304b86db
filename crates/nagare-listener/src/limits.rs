//! Connection limits: total and per client IP, over every listener of the server.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// Why a connection was refused; also the `reason` label of the rejection counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// The server already holds `max_connections`.
    MaxConnections,
    /// This client IP already holds `max_connections_per_ip`.
    MaxConnectionsPerIp,
}

impl Rejection {
    pub fn reason(self) -> &'static str {
        match self {
            Rejection::MaxConnections => "max_connections",
            Rejection::MaxConnectionsPerIp => "max_connections_per_ip",
        }
    }
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// The limits and the live counts they are checked against. 0 means unlimited.
pub struct ConnectionLimits {
    max_total: usize,
    max_per_ip: usize,
    counts: Mutex<Counts>,
}

/// One admitted connection's place in the counts, given back when dropped.
#[must_use = "the connection is uncounted as soon as the permit is dropped"]
pub struct Permit {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
}

impl ConnectionLimits {
    pub fn new(max_total: usize, max_per_ip: usize) -> Arc<ConnectionLimits> {
        Arc::new(ConnectionLimits {
            max_total,
            max_per_ip,
            counts: Mutex::new(Counts::default()),
        })
    }

    /// Counts a connection from `ip`, or says which limit it is over.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Permit, Rejection> {
        let mut counts = self.lock();
        if self.max_total > 0 && counts.total >= self.max_total {
            return Err(Rejection::MaxConnections);
        }
        let from_ip = counts.per_ip.get(&ip).copied().unwrap_or(0);
        if self.max_per_ip > 0 && from_ip >= self.max_per_ip {
            return Err(Rejection::MaxConnectionsPerIp);
        }
        counts.total += 1;
        counts.per_ip.insert(ip, from_ip + 1);
        Ok(Permit {
            limits: self.clone(),
            ip,
        })
    }

    /// Connections counted now.
    pub fn open(&self) -> usize {
        self.lock().total
    }

    fn release(&self, ip: IpAddr) {
        let mut counts = self.lock();
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.per_ip.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                // Forget idle addresses so the map stays as small as the live set.
                counts.per_ip.remove(&ip);
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Counts> {
        // The counts stay consistent under every panic point (each update is one step),
        // so a poisoned lock is still usable.
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.limits.release(self.ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn per_ip_limit_counts_each_address_on_its_own() {
        let limits = ConnectionLimits::new(0, 2);
        let a1 = limits.admit(ip(1)).unwrap();
        let _a2 = limits.admit(ip(1)).unwrap();
        assert_eq!(
            limits.admit(ip(1)).err(),
            Some(Rejection::MaxConnectionsPerIp)
        );
        let _b = limits.admit(ip(2)).unwrap();
        drop(a1);
        let _a3 = limits.admit(ip(1)).unwrap();
        assert_eq!(limits.open(), 3);
    }

    #[test]
    fn total_limit_applies_over_all_addresses() {
        let limits = ConnectionLimits::new(2, 0);
        let a = limits.admit(ip(1)).unwrap();
        let _b = limits.admit(ip(2)).unwrap();
        assert_eq!(limits.admit(ip(3)).err(), Some(Rejection::MaxConnections));
        drop(a);
        let _c = limits.admit(ip(3)).unwrap();
    }

    #[test]
    fn zero_means_unlimited() {
        let limits = ConnectionLimits::new(0, 0);
        let permits: Vec<_> = (0..1000).map(|_| limits.admit(ip(1)).unwrap()).collect();
        assert_eq!(limits.open(), 1000);
        drop(permits);
        assert_eq!(limits.open(), 0);
    }

    #[test]
    fn rejected_attempts_do_not_count() {
        let limits = ConnectionLimits::new(1, 1);
        let a = limits.admit(ip(1)).unwrap();
        for _ in 0..10 {
            assert!(limits.admit(ip(1)).is_err());
            assert!(limits.admit(ip(2)).is_err());
        }
        drop(a);
        assert_eq!(limits.open(), 0);
        let _b = limits.admit(ip(2)).unwrap();
    }
}
