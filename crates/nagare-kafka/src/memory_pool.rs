//! The request memory pool (Kafka's `queued.max.request.bytes`): the bytes of requests
//! read but not yet answered, over all connections of the listener, stay under one bound.
//!
//! A connection takes a lease for a request as soon as its size prefix is known and
//! before it reads the body; the lease is returned when the request has been answered.
//! When the pool is empty the connection simply stops reading until memory comes back,
//! so a flood of producers slows down (TCP backpressure) instead of growing the heap,
//! and no valid client ever gets an error for it. Waiters are served in arrival order,
//! so a large request is not starved by a stream of small ones.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

/// Why a request cannot get memory at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("request of {size} bytes is larger than the whole request memory pool ({capacity} bytes)")]
pub struct TooLargeForPool {
    pub size: usize,
    pub capacity: usize,
}

/// Shared by every connection of a listener.
#[derive(Debug, Clone)]
pub struct RequestPool {
    permits: Arc<Semaphore>,
    capacity: usize,
}

/// Memory held by one request until it is answered (returned on drop).
#[derive(Debug)]
pub struct Lease {
    _permit: Option<OwnedSemaphorePermit>,
}

impl RequestPool {
    /// A pool of `capacity` bytes (at most what a semaphore can count).
    pub fn new(capacity: u64) -> RequestPool {
        let capacity = usize::try_from(capacity)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        RequestPool {
            permits: Arc::new(Semaphore::new(capacity)),
            capacity,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes not leased right now.
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }

    /// A lease for `size` bytes if the pool has them now; `Ok(None)` means wait with
    /// [`RequestPool::lease`].
    pub fn try_lease(&self, size: usize) -> Result<Option<Lease>, TooLargeForPool> {
        let n = self.permit_count(size)?;
        if n == 0 {
            return Ok(Some(Lease { _permit: None }));
        }
        match self.permits.clone().try_acquire_many_owned(n) {
            Ok(p) => Ok(Some(Lease { _permit: Some(p) })),
            Err(TryAcquireError::NoPermits) | Err(TryAcquireError::Closed) => Ok(None),
        }
    }

    /// Waits until `size` bytes are free and leases them.
    pub async fn lease(&self, size: usize) -> Result<Lease, TooLargeForPool> {
        let n = self.permit_count(size)?;
        if n == 0 {
            return Ok(Lease { _permit: None });
        }
        // The semaphore is never closed, so acquiring only fails if it were.
        match self.permits.clone().acquire_many_owned(n).await {
            Ok(p) => Ok(Lease { _permit: Some(p) }),
            Err(_) => Err(TooLargeForPool {
                size,
                capacity: self.capacity,
            }),
        }
    }

    fn permit_count(&self, size: usize) -> Result<u32, TooLargeForPool> {
        let too_large = TooLargeForPool {
            size,
            capacity: self.capacity,
        };
        if size > self.capacity {
            return Err(too_large);
        }
        u32::try_from(size).map_err(|_| too_large)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn leases_are_bounded_and_returned_on_drop() {
        let pool = RequestPool::new(100);
        let a = pool.try_lease(60).unwrap().expect("fits");
        assert_eq!(pool.available(), 40);
        assert!(
            pool.try_lease(41).unwrap().is_none(),
            "would exceed the pool"
        );
        let b = pool.try_lease(40).unwrap().expect("fits exactly");
        assert_eq!(pool.available(), 0);
        assert!(
            pool.try_lease(0).unwrap().is_some(),
            "empty requests need nothing"
        );
        drop(a);
        assert_eq!(pool.available(), 60);
        drop(b);
        assert_eq!(pool.available(), 100);
    }

    #[test]
    fn a_request_larger_than_the_pool_is_refused() {
        let pool = RequestPool::new(100);
        assert_eq!(
            pool.try_lease(101).unwrap_err(),
            TooLargeForPool {
                size: 101,
                capacity: 100
            }
        );
        assert!(pool.try_lease(100).unwrap().is_some());
    }

    #[tokio::test]
    async fn a_waiter_gets_memory_once_it_is_released() {
        let pool = RequestPool::new(100);
        let held = pool.try_lease(80).unwrap().expect("fits");
        let waiter = {
            let pool = pool.clone();
            tokio::spawn(async move { pool.lease(50).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "must wait while the pool is short");
        drop(held);
        let lease = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken after the release")
            .unwrap()
            .unwrap();
        assert_eq!(pool.available(), 50);
        drop(lease);
        assert_eq!(pool.available(), 100);
    }

    #[tokio::test]
    async fn waiters_are_served_in_order() {
        // A large request waiting first is not overtaken by later small ones: memory
        // released goes to it before anyone else.
        let pool = RequestPool::new(100);
        let a = pool.try_lease(60).unwrap().expect("fits");
        let b = pool.try_lease(30).unwrap().expect("fits");
        let big = {
            let pool = pool.clone();
            tokio::spawn(async move { pool.lease(90).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(b);
        assert!(
            pool.try_lease(10).unwrap().is_none(),
            "the free 40 bytes are kept for the waiting request"
        );
        drop(a);
        let big = tokio::time::timeout(Duration::from_secs(5), big)
            .await
            .expect("big request served")
            .unwrap()
            .unwrap();
        assert_eq!(pool.available(), 10);
        drop(big);
    }
}
