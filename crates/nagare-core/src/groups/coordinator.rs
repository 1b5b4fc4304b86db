//! The driver around [`Groups`]: one lock, a timer task for the deadlines, and a writer
//! task that appends state changes to the internal log in the order they were made.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nagare_log::batch::NewRecord;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot, Notify};

use super::CommittedOffset;
use super::{
    GroupConfig, GroupDescription, GroupError, GroupListing, Groups, JoinRequest, JoinResponse,
    LeavingMember, OffsetCommitRequest, PersistOp, SyncRequest, SyncResponse, TopicPartition,
};
use crate::{AckLevel, Broker, CoreError, Partition};

/// Name of the internal log (`DATA/__nagare_consumer_offsets-0`).
pub const OFFSETS_LOG: &str = "consumer_offsets";

/// Records per append of the writer task at most.
const MAX_RECORDS_PER_APPEND: usize = 4096;
/// Compact on start when the log holds more than this many records...
const COMPACT_MIN_RECORDS: usize = 1000;
/// ...and more than this many times the live keys.
const COMPACT_RATIO: usize = 2;
/// Longest sleep of the timer task when nothing is due.
const IDLE_TICK: Duration = Duration::from_secs(1);

type Done = oneshot::Sender<Result<(), GroupError>>;

struct WriteJob {
    records: Vec<NewRecord>,
    done: Option<Done>,
}

/// The group coordinator of one broker.
pub struct GroupCoordinator {
    groups: Mutex<Groups>,
    started: Instant,
    wake: Arc<Notify>,
    writer: mpsc::UnboundedSender<WriteJob>,
}

impl GroupCoordinator {
    /// Replays the internal log and starts the timer and writer tasks (on the current
    /// tokio runtime). The tasks end when the coordinator is dropped.
    pub fn open(broker: &Broker, config: GroupConfig) -> Result<Arc<GroupCoordinator>, CoreError> {
        let log = broker.internal_log(OFFSETS_LOG)?;
        let mut groups = Groups::new(config);
        let replayed = crate::blocking::off_runtime(|| replay(&log, &mut groups))?;
        tracing::info!(
            records = replayed,
            groups = groups.groups.len(),
            "group coordinator loaded"
        );
        // Compaction on start: when most records are superseded, the live state is
        // written again as one batch and everything before it dropped. The snapshot is
        // stored before anything is deleted, so a crash in between loses nothing.
        let snapshot = groups.snapshot();
        let compact = (replayed >= COMPACT_MIN_RECORDS
            && replayed > COMPACT_RATIO * snapshot.len())
        .then(|| {
            let ts = unix_millis();
            snapshot
                .iter()
                .map(|op| op.to_record(ts))
                .collect::<Vec<_>>()
        });
        let (writer, rx) = mpsc::unbounded_channel();
        let coordinator = Arc::new(GroupCoordinator {
            groups: Mutex::new(groups),
            started: Instant::now(),
            wake: Arc::new(Notify::new()),
            writer,
        });
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(run_writer(log, rx, compact));
                rt.spawn(run_timer(
                    Arc::downgrade(&coordinator),
                    coordinator.wake.clone(),
                ));
            }
            // Without a runtime (a synchronous test, a tool) there is nobody to store
            // changes: `rx` is dropped, so commits fail with COORDINATOR_NOT_AVAILABLE
            // rather than hang.
            Err(_) => tracing::warn!("group coordinator opened outside a tokio runtime"),
        }
        Ok(coordinator)
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Runs `f` on the state under the lock, then queues what it changed for the log
    /// (in order) and wakes the timer, whose next deadline may have moved.
    fn with<R>(&self, done: Option<Done>, f: impl FnOnce(&mut Groups, u64) -> R) -> R {
        let result = self.locked(done, f);
        self.wake.notify_one();
        result
    }

    /// [`with`](Self::with) without waking the timer (the timer itself uses this, or it
    /// would wake itself forever).
    fn locked<R>(&self, done: Option<Done>, f: impl FnOnce(&mut Groups, u64) -> R) -> R {
        let now = self.now();
        let mut groups = self.groups.lock();
        let r = f(&mut groups, now);
        let ops = groups.drain_outbox();
        self.queue(ops, done);
        r
    }

    fn queue(&self, ops: Vec<PersistOp>, done: Option<Done>) {
        if ops.is_empty() {
            if let Some(d) = done {
                let _ = d.send(Ok(()));
            }
            return;
        }
        let ts = unix_millis();
        let records = ops.iter().map(|op| op.to_record(ts)).collect();
        if let Err(mpsc::error::SendError(job)) = self.writer.send(WriteJob { records, done }) {
            if let Some(d) = job.done {
                let _ = d.send(Err(GroupError::CoordinatorNotAvailable));
            }
        }
    }

    /// JoinGroup; waits for the rebalance when the member has to.
    pub async fn join(&self, req: JoinRequest) -> Result<JoinResponse, GroupError> {
        let (tx, rx) = oneshot::channel();
        self.with(None, |g, now| g.join(req, now, tx));
        rx.await.unwrap_or(Err(GroupError::RebalanceInProgress))
    }

    /// SyncGroup; followers wait for the leader's assignment.
    pub async fn sync(&self, req: SyncRequest) -> Result<SyncResponse, GroupError> {
        let (tx, rx) = oneshot::channel();
        self.with(None, |g, now| g.sync(req, now, tx));
        rx.await.unwrap_or(Err(GroupError::RebalanceInProgress))
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), GroupError> {
        self.with(None, |g, now| {
            g.heartbeat(group_id, member_id, group_instance_id, generation, now)
        })
    }

    pub fn leave(
        &self,
        group_id: &str,
        members: &[LeavingMember],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        self.with(None, |g, now| g.leave(group_id, members, now))
    }

    /// OffsetCommit; answers once the offsets are in the internal log.
    pub async fn commit_offsets(
        &self,
        req: OffsetCommitRequest,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let (tx, rx) = oneshot::channel();
        let results = self.with(Some(tx), |g, now| g.commit_offsets(req, now, unix_millis()))?;
        match rx.await {
            Ok(Ok(())) => Ok(results),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(GroupError::CoordinatorNotAvailable),
        }
    }

    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[TopicPartition]>,
    ) -> Vec<(TopicPartition, Option<CommittedOffset>)> {
        self.groups.lock().fetch_offsets(group_id, partitions)
    }

    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let (tx, rx) = oneshot::channel();
        let results = self.with(Some(tx), |g, _| g.delete_offsets(group_id, partitions))?;
        match rx.await {
            Ok(Ok(())) => Ok(results),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(GroupError::CoordinatorNotAvailable),
        }
    }

    /// DeleteGroups: one result per group, in order.
    pub async fn delete_groups(&self, group_ids: &[String]) -> Vec<Result<(), GroupError>> {
        let (tx, rx) = oneshot::channel();
        let results: Vec<_> = self.with(Some(tx), |g, _| {
            group_ids.iter().map(|id| g.delete_group(id)).collect()
        });
        match rx.await {
            Ok(Ok(())) => results,
            Ok(Err(e)) => results.into_iter().map(|_| Err(e.clone())).collect(),
            Err(_) => results
                .into_iter()
                .map(|_| Err(GroupError::CoordinatorNotAvailable))
                .collect(),
        }
    }

    pub fn list_groups(&self) -> Vec<GroupListing> {
        self.groups.lock().list_groups()
    }

    pub fn describe_group(&self, group_id: &str) -> GroupDescription {
        self.groups.lock().describe_group(group_id)
    }

    /// Runs the due timeouts now (for the timer task, and for tests).
    pub fn tick(&self) -> Option<u64> {
        self.locked(None, |g, now| {
            g.tick(now);
            g.next_deadline().map(|d| d.saturating_sub(now))
        })
    }
}

fn unix_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Sleeps until the next deadline (or until a request moved it), then ticks.
async fn run_timer(coordinator: Weak<GroupCoordinator>, wake: Arc<Notify>) {
    loop {
        let wait = match coordinator.upgrade() {
            Some(c) => c.tick(),
            None => return,
        };
        let wait = wait.map_or(IDLE_TICK, |ms| {
            Duration::from_millis(ms.max(1)).min(IDLE_TICK)
        });
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = wake.notified() => {}
        }
    }
}

/// Appends queued changes in order, several jobs per append when they pile up.
async fn run_writer(
    log: Arc<Partition>,
    mut rx: mpsc::UnboundedReceiver<WriteJob>,
    compact: Option<Vec<NewRecord>>,
) {
    if let Some(records) = compact {
        compact_log(&log, &records).await;
    }
    while let Some(first) = rx.recv().await {
        let mut records = first.records;
        let mut done: Vec<Done> = first.done.into_iter().collect();
        while records.len() < MAX_RECORDS_PER_APPEND {
            match rx.try_recv() {
                Ok(job) => {
                    records.extend(job.records);
                    done.extend(job.done);
                }
                Err(_) => break,
            }
        }
        let result = log
            .append_records(&records, AckLevel::Durable)
            .await
            .map(|_| ())
            .map_err(|e| {
                tracing::error!(error = %e, "could not store group state");
                GroupError::Storage(e.to_string())
            });
        for d in done {
            let _ = d.send(result.clone());
        }
    }
}

/// Appends the live state as one batch, then drops every record before it.
async fn compact_log(log: &Partition, live: &[NewRecord]) {
    let before = log.log_start_offset();
    let snapshot_start = if live.is_empty() {
        Ok(log.log_end_offset())
    } else {
        log.append_records(live, AckLevel::Durable)
            .await
            .map(|info| info.base_offset)
    };
    let result = snapshot_start.and_then(|at| {
        log.log()
            .delete_records_before(at)
            .map(|()| at)
            .map_err(CoreError::from)
    });
    match result {
        Ok(at) => tracing::info!(
            dropped = at - before,
            live = live.len(),
            "group log compacted"
        ),
        Err(e) => {
            tracing::warn!(error = %e, "group log compaction failed; the log stays as it was")
        }
    }
}

/// Reads the whole internal log into `groups`; returns how many records it applied.
fn replay(log: &Partition, groups: &mut Groups) -> Result<usize, CoreError> {
    let mut applied = 0;
    log.replay_records(|r| {
        match PersistOp::from_record(&r) {
            Some(op) => {
                groups.apply(op);
                applied += 1;
            }
            None => tracing::warn!(offset = r.offset, "skipping an unreadable group log record"),
        }
        Ok(())
    })?;
    Ok(applied)
}
