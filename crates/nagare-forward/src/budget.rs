//! The receiver-wide memory cap (`[forward] max_buffered_bytes`): bytes read from
//! senders but not yet appended, across every connection.
//!
//! A connection reserves bytes before each read; when the cap is reached, reads wait
//! (TCP backpressure reaches the senders) until other connections release theirs after
//! their appends. Waiting is fair (first come, first served).
//!
//! Deadlock guard: connections in the middle of a request hold bytes they cannot give
//! back until the request is complete. If all of them waited for each other the
//! receiver would stop for good, so one connection at a time may finish its request
//! beyond the cap (the "overdraft"). Memory stays below twice the cap, because a
//! single request larger than the cap is refused outright.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The shared pool of one listener.
pub struct Budget {
    bytes: Arc<Semaphore>,
    overdraft: Arc<Semaphore>,
    cap: usize,
}

impl Budget {
    pub fn new(cap: usize) -> Budget {
        let cap = cap.clamp(1, Semaphore::MAX_PERMITS);
        Budget {
            bytes: Arc::new(Semaphore::new(cap)),
            overdraft: Arc::new(Semaphore::new(1)),
            cap,
        }
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Bytes currently free.
    pub fn available(&self) -> usize {
        self.bytes.available_permits()
    }

    fn publish(&self) {
        let used = self.cap.saturating_sub(self.available());
        metrics::gauge!("nagare_forward_buffered_bytes").set(used as f64);
    }
}

/// One connection's share of the pool; gives everything back when dropped.
pub struct Share {
    budget: Arc<Budget>,
    held: usize,
    overdraft: Option<OwnedSemaphorePermit>,
}

impl Share {
    pub fn new(budget: Arc<Budget>) -> Share {
        Share {
            budget,
            held: 0,
            overdraft: None,
        }
    }

    pub fn held(&self) -> usize {
        self.held
    }

    /// Makes room for `n` more bytes, waiting while the pool is exhausted.
    /// `mid_request`: bytes of an incomplete request are already held, so this
    /// connection may take the overdraft rather than wait for the others forever.
    pub async fn reserve(&mut self, n: usize, mid_request: bool) {
        if n == 0 || self.overdraft.is_some() {
            return;
        }
        let n = n.min(self.budget.cap);
        let Ok(n32) = u32::try_from(n) else {
            return;
        };
        if let Ok(p) = self.budget.bytes.try_acquire_many(n32) {
            p.forget();
            self.held += n;
            self.budget.publish();
            return;
        }
        metrics::counter!("nagare_forward_backpressure_waits_total").increment(1);
        let bytes = self.budget.bytes.clone();
        let overdraft = self.budget.overdraft.clone();
        tokio::select! {
            got = bytes.acquire_many_owned(n32) => {
                if let Ok(p) = got {
                    p.forget();
                    self.held += n;
                    self.budget.publish();
                }
            }
            got = overdraft.acquire_owned(), if mid_request => {
                self.overdraft = got.ok();
            }
        }
    }

    /// Keeps `keep` bytes (what is still buffered) and gives the rest back. An overdraft
    /// ends once the bytes still buffered are covered by the pool again (at the latest
    /// when the buffer is empty), so only one connection is ever beyond the cap.
    pub fn release_to(&mut self, keep: usize) {
        if self.held > keep {
            self.budget.bytes.add_permits(self.held - keep);
            self.held = keep;
        }
        if self.overdraft.is_some() && self.held < keep {
            let deficit = u32::try_from(keep - self.held).unwrap_or(u32::MAX);
            if let Ok(p) = self.budget.bytes.try_acquire_many(deficit) {
                p.forget();
                self.held = keep;
            }
        }
        if self.held >= keep {
            self.overdraft = None;
        }
        self.budget.publish();
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        self.release_to(0);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn budget(cap: usize) -> Arc<Budget> {
        Arc::new(Budget::new(cap))
    }

    async fn completes(f: impl std::future::Future<Output = ()>) -> bool {
        tokio::time::timeout(Duration::from_millis(100), f)
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn reservations_count_against_the_cap_and_come_back() {
        let b = budget(1000);
        let mut a = Share::new(b.clone());
        a.reserve(600, false).await;
        assert_eq!((a.held(), b.available()), (600, 400));
        a.release_to(100);
        assert_eq!((a.held(), b.available()), (100, 900));
        drop(a);
        assert_eq!(b.available(), 1000);
    }

    #[tokio::test]
    async fn a_reader_at_a_request_boundary_waits_until_memory_is_released() {
        let b = budget(1000);
        let mut a = Share::new(b.clone());
        a.reserve(900, false).await;
        let mut c = Share::new(b.clone());
        assert!(!completes(c.reserve(500, false)).await);
        a.release_to(0);
        assert!(completes(c.reserve(500, false)).await);
        assert_eq!(c.held(), 500);
        assert_eq!(b.available(), 500);
    }

    #[tokio::test]
    async fn one_connection_mid_request_may_overdraw_so_nobody_deadlocks() {
        let b = budget(1000);
        let mut a = Share::new(b.clone());
        let mut c = Share::new(b.clone());
        a.reserve(500, false).await;
        c.reserve(500, false).await;
        // Both hold half a request and need more: one gets the overdraft ...
        assert!(completes(a.reserve(500, true)).await);
        assert!(
            completes(a.reserve(500, true)).await,
            "overdraft lasts the request"
        );
        // ... the other waits for it to finish.
        assert!(!completes(c.reserve(500, true)).await);
        a.release_to(0);
        assert!(completes(c.reserve(500, true)).await);
        drop(c);
        assert_eq!(b.available(), 1000);
    }

    #[tokio::test]
    async fn a_reservation_never_exceeds_the_cap() {
        let b = budget(1000);
        let mut a = Share::new(b.clone());
        assert!(completes(a.reserve(5000, false)).await);
        assert_eq!(a.held(), 1000);
    }
}
