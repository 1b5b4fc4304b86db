//! Bounded waits for load generators with several receiving connections: one connection
//! may rightly get nothing for a while (a broker may hand a whole prefetch window to
//! another consumer), so a wait fails only when the run as a whole has stopped moving.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::bail;

/// Awaits `fut`; fails with `stalled(count)` once `progress` (a count every receiving task
/// adds to) has not moved for `idle`.
pub(super) async fn bounded<T>(
    progress: &AtomicU64,
    idle: Duration,
    fut: impl Future<Output = anyhow::Result<T>>,
    stalled: impl Fn(u64) -> String,
) -> anyhow::Result<T> {
    tokio::pin!(fut);
    let mut last = progress.load(Ordering::Relaxed);
    loop {
        match tokio::time::timeout(idle, &mut fut).await {
            Ok(r) => return r,
            Err(_) => {
                let now = progress.load(Ordering::Relaxed);
                if now == last {
                    bail!("{}", stalled(now));
                }
                last = now;
            }
        }
    }
}
