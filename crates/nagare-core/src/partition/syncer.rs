//! Group commit with one fsync thread per busy partition.
//!
//! A waiter registers the offset it needs on disk and awaits a oneshot. While anyone
//! waits, exactly one blocking-pool job runs the partition's fsyncs back to back: each
//! round fsyncs up to the log's end as it is then, and answers every waiter that round
//! covered. When nobody waits the job ends, and the next waiter starts a new one.
//!
//! Why not one blocking-pool job per waiter: then every acks=all request woke a pool
//! thread that slept on the log's sync lock behind the running fsync, and woke again to
//! find its offsets already covered. With five produce requests in flight that was
//! several thread switches per request; on two virtual cores they cost more CPU than the
//! fsyncs did, CPU the producer on the same machine was short of. Here a round costs one
//! fsync and one wake-up per waiting task, and the next round starts on the same thread
//! without waiting for a runtime thread to hand over the turn.

use std::sync::Arc;

use nagare_log::PartitionLog;
use parking_lot::Mutex;
use tokio::sync::oneshot;

/// A waiter's answer: `true` once its offsets are durable, `false` when the round that
/// should have covered them failed (the waiter then fsyncs itself for the typed error).
type Done = oneshot::Sender<bool>;

/// The waiters of one partition, and whether a syncing job is running for them.
#[derive(Default)]
pub(super) struct Syncer {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    running: bool,
    waiters: Vec<(i64, Done)>,
}

impl Syncer {
    /// Registers a wait for every offset below `offset` to be durable, starting the
    /// syncing job if none runs. The answer is `false` if an fsync failed, or the job could
    /// not run (shutdown).
    pub(super) async fn wait(self: &Arc<Self>, log: &Arc<PartitionLog>, offset: i64) -> bool {
        let (done, answer) = oneshot::channel();
        let start = {
            let mut state = self.state.lock();
            state.waiters.push((offset, done));
            !std::mem::replace(&mut state.running, true)
        };
        if start {
            let job = Job {
                syncer: self.clone(),
                log: log.clone(),
            };
            // A job that never runs (the runtime is shutting down) is dropped, which
            // answers its waiters `false` through `Job::drop`.
            drop(tokio::task::spawn_blocking(move || job.run()));
        }
        answer.await.unwrap_or(false)
    }
}

/// The running syncing job. Dropping it (done, or never run) hands the turn back.
struct Job {
    syncer: Arc<Syncer>,
    log: Arc<PartitionLog>,
}

impl Job {
    fn run(self) {
        loop {
            let wanted = {
                let state = self.syncer.state.lock();
                match state.waiters.iter().map(|(offset, _)| *offset).max() {
                    Some(wanted) => wanted,
                    // `Drop` clears `running` under the lock, so a waiter arriving now
                    // starts the next job.
                    None => return,
                }
            };
            let ok = self.log.sync_to(wanted).is_ok();
            let flushed = self.log.flushed_offset();
            let answered: Vec<Done> = {
                let mut state = self.syncer.state.lock();
                let waiters = std::mem::take(&mut state.waiters);
                let (covered, later): (Vec<_>, Vec<_>) = waiters
                    .into_iter()
                    .partition(|(offset, _)| *offset <= flushed || (!ok && *offset <= wanted));
                state.waiters = later;
                covered.into_iter().map(|(_, done)| done).collect()
            };
            // Woken outside the lock: a woken task may register its next wait at once.
            for done in answered {
                let _ = done.send(ok);
            }
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let mut state = self.syncer.state.lock();
        state.running = false;
        // Only a job that never ran leaves waiters behind: their senders drop here, and
        // they fall back to an fsync of their own.
        state.waiters.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nagare_log::batch::{build_batch, NewRecord};
    use nagare_log::LogConfig;

    fn open(dir: &std::path::Path) -> Arc<PartitionLog> {
        Arc::new(PartitionLog::open(dir, LogConfig::default()).unwrap())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_waiters_are_all_answered_once_durable() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path());
        let syncer = Arc::new(Syncer::default());
        let mut tasks = Vec::new();
        for _ in 0..50 {
            let info = log
                .append(&mut build_batch(&[NewRecord::default()]))
                .unwrap();
            let (log, syncer) = (log.clone(), syncer.clone());
            let end = info.last_offset + 1;
            tasks.push(tokio::spawn(async move {
                assert!(syncer.wait(&log, end).await);
                assert!(log.flushed_offset() >= end);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        // The job hands its turn back just after answering its last waiters, on its own
        // thread: wait (bounded) for that instead of racing it.
        for _ in 0..500 {
            if !syncer.state.lock().running {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(!syncer.state.lock().running);
        assert!(syncer.state.lock().waiters.is_empty());
    }
}
